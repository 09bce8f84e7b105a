import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS, resolveSettings } from '../config/index.js';
import type { InviteOptions } from '../crm/index.js';
import type { FieldError, IngestedRow } from '../ingest/index.js';
import { CrmSyncError } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import {
  failed,
  invalid,
  newNames,
  placeOf,
  skipped,
  type RowResult,
  type RunStore,
  type SentName,
} from '../runs/index.js';
import { addTracedBatches } from '../telemetry/index.js';
import type { InviteBatchJobData, InviteRow, QueuedRow, SyncJobData, SyncJobName } from '../queue/index.js';
import { FIRST_ROUND, rowJobId, workspaceOfQueue } from '../queue/index.js';
import { rideOutRedis } from '../redis/index.js';
import { createsInDoubt, stopOf, stoppedInDoubt, stoppedResult, type RunStop } from './stop-run.js';
import { WorkBoard } from '../queue/index.js';
import { pendingJobCount, type WorkspaceQueue } from '../queue/index.js';

export interface ProducerOptions {
  queue: WorkspaceQueue;
  store: RunStore;
  runId: string;
  /** Rows per `addBulk` call (whole jobs: a chunk ends with the job that reaches it). Default DEFAULTS.producer (500). */
  chunkSize?: number;
  /**
   * Reading pauses while the workspace queue holds about this many waiting rows (waiting jobs ×
   * rows per job). Default DEFAULTS.producer (10,000).
   */
  highWaterMark?: number;
  /** Emails per team-members request. Default DEFAULTS.producer (50). */
  inviteBatchSize?: number;
  /** Update rows per job (the workspace's `rowsPerJob`; creates always go alone). Default DEFAULTS.producer (1). */
  rowsPerJob?: number;
  /** Retry generation, part of job ids so a retry is not deduped against the first try. Default FIRST_ROUND. */
  generation?: number;
  /** Validate and record only; send nothing (valid rows end `skipped`, "dry run"). Default false. */
  dryRun?: boolean;
  /** The rows were already counted as queued (a retry, after `requeueRows`). Default false. */
  requeued?: boolean;
  /**
   * The run's stop (run-life.ts owns it; its reason is a RunStop). Once aborted, rows that
   * would be queued are recorded as stopped instead (cancelled, or failed RUN_ABORTED); a
   * cancel also stops reading. The run's status also stops it: a cancelled run refuses its
   * next chunk (addQueued). Default: never.
   */
  signal?: AbortSignal;
  logger?: Logger;
  onProgress?: (progress: ProducerProgress) => void;
  /**
   * While Redis does not answer (a restart, a partition) the producer waits and repeats its
   * step, up to this long; then it stops with REDIS_LOST, saying how to resume. Default 60000 ms.
   */
  redisOutageMs?: number;
  /**
   * Looked at before each chunk is queued and about once a second while the producer waits for
   * room: what Redis itself says (full, evicting keys). 'hold' keeps the next chunk back (Redis
   * evicts keys: what is queued now could vanish) until it answers 'go'; it throws to stop
   * producing (Redis evicted keys: REDIS_EVICTS). Without it, nothing is looked at.
   */
  redisWatch?: () => Promise<'go' | 'hold'>;
  /** Rows up to this one were queued by an earlier producer of the run (a resume): not counted again. Default 0. */
  countedThrough?: number;
  /**
   * The source's columns once it is read to its end. Given, the producer's last step records
   * that every row is queued or recorded, so a run whose process dies before it finishes is
   * completed by the workers' sweep rather than failed. Default: not recorded (a retry).
   */
  sourceColumns?: () => string[];
}

export interface ProducerProgress {
  /** Rows taken from the source (a resume's earlier rows queued again among them). */
  read: number;
  /** Rows handed to the queue (a resume's earlier rows queued again among them). */
  queued: number;
  invalid: number;
  /**
   * Of `queued`, a resume's rows at or before where the earlier producer got (`countedThrough`)
   * that had no result yet, queued again without being counted again: not rows read anew.
   */
  again: number;
}

/**
 * A row whose final result is already known before sending (reconcile: unchanged → skipped,
 * key matched nothing or several records → failed). Recorded at once, never enqueued.
 */
export interface RowOutcome {
  status: 'skipped' | 'failed';
  code?: string;
  message: string;
  recordId?: string;
}

/**
 * What the producer consumes: an ingested row; what it carries into its job is QueuedRow's
 * (orderAs, expect, listPlace, undo, planned: documented there once); `outcome`, a
 * result decided before any job.
 */
export type ProducedRow = IngestedRow &
  Pick<QueuedRow, 'orderAs' | 'expect' | 'listPlace' | 'undo' | 'planned'> & {
    outcome?: RowOutcome;
  };

interface PendingJob {
  name: SyncJobName;
  data: SyncJobData;
  opts: { jobId: string };
  rows: number;
}

/**
 * Streams ingested rows into the workspace queue. It never holds more than one chunk plus the
 * open invite batches, and it waits while the queue is above the high-water mark, so memory in
 * this process and in Redis stays bounded for any file size. Invalid rows are recorded as
 * results at once and never enqueued. The run is marked producer-done at the end.
 */
export async function produceRun(
  rows: AsyncIterable<ProducedRow>,
  options: ProducerOptions,
): Promise<ProducerProgress> {
  const { queue, store, runId } = options;
  const {
    chunkSize,
    highWaterMark: highWater,
    inviteBatchSize: batchSize,
    ...o
  } = resolveSettings(options, {
    chunkSize: DEFAULTS.producer.chunkSize,
    highWaterMark: DEFAULTS.producer.highWaterMark,
    inviteBatchSize: DEFAULTS.producer.inviteBatchSize,
    rowsPerJob: DEFAULTS.producer.rowsPerJob,
  });
  const rowsPerJob = Math.max(1, o.rowsPerJob);
  // A retry names its own generation; without one, this is the run's first production.
  const generation = options.generation ?? FIRST_ROUND;
  // A retry's rows carry its round: the run store lets only that round's job write them.
  const round = generation === FIRST_ROUND ? {} : { round: generation };
  const logger = options.logger ?? silentLogger;
  const progress: ProducerProgress = { read: 0, queued: 0, invalid: 0, again: 0 };
  const board = new WorkBoard({ redis: store.redis, prefix: store.prefix });
  let jobs: PendingJob[] = [];
  let jobRows = 0;
  let results: RowResult[] = [];
  // The names rows gave for ids they send, each (field, id) once per producer (RunStore.addNames).
  let names: SentName[] = [];
  const namesSeen = new Set<string>();
  const invites = new Map<string, { options: InviteOptions; rows: InviteRow[] }>();
  // Update rows of one operation waiting to fill a job (reconcile mixes creates and updates).
  let open: QueuedRow[] = [];

  /**
   * Rows the run counts as queued whose jobs did not reach the queue yet: a chunk is counted
   * before its jobs are added (a worker may finish one before addBulk returns), so a step that
   * stopped between the two leaves them. `runs resume` queues them (up to `producedRow`).
   */
  let countedNotQueued = 0;
  const whereItStands = () =>
    `${progress.read} rows read, ${progress.queued} of them in the queue` +
    (countedNotQueued > 0
      ? `; the run counts ${countedNotQueued} more as queued that did not reach the queue (runs resume queues them)`
      : '');
  // Every Redis step below is safe to repeat, so a Redis restart or partition is waited out.
  const redisStep = <T>(step: () => Promise<T>) =>
    rideOutRedis(step, {
      logger,
      ...(options.redisOutageMs !== undefined ? { outageMs: options.redisOutageMs } : {}),
      giveUp: (waited, last) =>
        new CrmSyncError(
          'REDIS_LOST',
          `Redis did not answer for ${Math.round(waited / 1000)} s while run ${runId} was being produced (${whereItStands()}). ` +
            `Nothing queued is lost: once Redis answers, go on from where it stopped with: crm-sync runs resume ${runId}`,
          { cause: last },
        ),
      full: (waited, err) =>
        new CrmSyncError(
          'REDIS_FULL',
          `Redis stayed full (maxmemory reached) for ${Math.round(waited / 1000)} s while run ${runId} was being produced (${whereItStands()}); ` +
            `no row was sent that cannot be recorded. Free memory or raise maxmemory, then go on with: crm-sync runs resume ${runId}`,
          { cause: err },
        ),
    });
  const flushResults = async () => {
    if (results.length === 0) return;
    let batch = results;
    results = [];
    // A retry's create may have made its deal in an earlier round (its marker is set): stopped
    // before it was queued, it is never recorded "not sent" (which invites an import again).
    if (options.requeued) batch = await redisStep(() => keepInDoubt(batch));
    await redisStep(() => store.recordResults(runId, batch, { fromQueue: options.requeued ?? false }));
  };
  const keepInDoubt = async (batch: RowResult[]): Promise<RowResult[]> => {
    const isStopped = (r: RowResult) => r.status === 'cancelled' || r.code === 'RUN_ABORTED';
    const stop = stopNow();
    const rows = batch.filter(isStopped).map((r) => r.row);
    if (stop === undefined || rows.length === 0) return batch;
    const doubt = await createsInDoubt(store, { id: runId, workspace: workspaceOfQueue(queue.name) }, rows);
    return batch.map((r) =>
      isStopped(r) && doubt.has(r.row)
        ? stoppedInDoubt(stop, { row: r.row, line: r.line, ...(r.ref !== undefined ? { ref: r.ref } : {}) }, r.original)
        : r,
    );
  };
  // A cancel the store reported (addQueued refused) when no signal said so yet.
  let refused: RunStop | undefined;
  const stopNow = () => stopOf(options.signal) ?? refused;
  const flushJobs = async () => {
    if (jobs.length === 0) return;
    const batch = jobs;
    const count = jobRows;
    jobs = [];
    jobRows = 0;
    // The mark counts rows, the queue counts jobs: convert with this chunk's rows per job
    // (creates go one per job, invites and updates several).
    await redisStep(() =>
      waitForRoom(queue, jobsForRows(highWater, count / batch.length), logger, options.signal, options.redisWatch),
    );
    const held = (stop: RunStop) => {
      // Rows held here when the run stopped would otherwise reach the CRM after it.
      results.push(...batch.flatMap((j) => j.data.rows.map((r): RowResult => stoppedResult(stop, r, r.original))));
    };
    const stop = stopNow();
    if (stop !== undefined) return held(stop);
    // Before the jobs exist: a result read as soon as it is stored finds its names.
    if (names.length > 0) {
      const adding = names;
      names = [];
      await redisStep(() => store.addNames(runId, adding));
    }
    const rowsOf = batch.flatMap((j): Array<{ row: number }> => j.data.rows);
    // Not a setting: without a resume, no row was counted by an earlier producer.
    const counted = rowsOf.filter((r) => r.row > (options.countedThrough ?? 0)).length;
    // Update and create jobs are flushed in row order, so their highest row marks how far the
    // producer got; invite batches fill by options and are flushed out of order.
    const through = batch.some((j) => j.name === 'team.invite') ? undefined : Math.max(...rowsOf.map((r) => r.row));
    const added = await redisStep(async () => {
      // Count first (a worker may finish a job before addBulk returns); counted once per row
      // even when this step is repeated, and job ids make a repeated addBulk add nothing new.
      if (!options.requeued && counted > 0 && (await store.addQueued(runId, counted, through)) === 'cancelled')
        return false;
      countedNotQueued = counted;
      // A retry's rows were counted when they were requeued: ask the run's status instead.
      if (options.requeued && (await store.getStatus(runId)) === 'cancelled') return false;
      await addTracedBatches(
        workspaceOfQueue(queue.name),
        batch.map(({ name, data, opts }) => ({ name, data, opts })),
        (jobs) => queue.addBulk(jobs),
      );
      countedNotQueued = 0;
      // After the jobs exist: an idle pool starts a worker for the workspace (WorkBoard).
      await board.signal(workspaceOfQueue(queue.name));
      return true;
    });
    if (!added) {
      refused = { kind: 'cancelled', reason: (await store.requireRun(runId)).reason ?? 'cancelled' };
      return held(refused);
    }
    progress.queued += count;
    progress.again += rowsOf.length - counted;
  };
  const pushJob = (job: PendingJob) => {
    jobs.push(job);
    jobRows += job.rows;
  };
  const pushInviteBatch = (batch: { options: InviteOptions; rows: InviteRow[] }) => {
    const first = batch.rows[0];
    if (!first) return;
    const data: InviteBatchJobData = { runId, rows: batch.rows, options: batch.options };
    pushJob({
      name: 'team.invite',
      data,
      opts: { jobId: rowJobId(runId, first.row, generation) },
      rows: batch.rows.length,
    });
  };
  const pushRows = () => {
    const first = open[0];
    if (!first) return;
    pushJob({
      name: first.payload.op,
      data: { runId, rows: open },
      opts: { jobId: rowJobId(runId, first.row, generation) },
      rows: open.length,
    });
    open = [];
  };

  for await (const row of rows) {
    // A cancelled run reads no further: its rows not read have no result and are not counted.
    // Not a retry: its source already took each row out of the store, so each must be recorded.
    if (!options.requeued && stopNow()?.kind === 'cancelled') break;
    progress.read += 1;
    const stop = stopNow();
    if (row.outcome) {
      const o = row.outcome;
      results.push(
        o.status === 'skipped'
          ? skipped(row, o.message, o.recordId)
          : failed(row, { code: o.code, message: o.message, recordId: o.recordId }, row.original),
      );
    } else if (!row.payload) {
      progress.invalid += 1;
      results.push(invalid(row, row.errors ?? [], row.original, row.code ?? 'ROW_INVALID'));
    } else if (options.dryRun) {
      const left = row.skippedFields?.length ? `; ${skippedFieldsNote(row.skippedFields)}` : '';
      results.push(skipped(row, `dry run: valid, not sent${left}`));
    } else if (stop !== undefined) {
      results.push(stoppedResult(stop, row, row.original));
    } else if (row.payload.op === 'team.invite') {
      const key = inviteKey(row.payload.options);
      const batch = invites.get(key) ?? { options: row.payload.options, rows: [] };
      batch.rows.push({ ...placeOf(row), email: row.payload.email, original: row.original, ...round });
      invites.set(key, batch);
      if (batch.rows.length >= batchSize) {
        pushInviteBatch(batch);
        invites.delete(key);
      }
    } else {
      if (row.names) names.push(...newNames(row.names, namesSeen));
      if (open[0] && open[0].payload.op !== row.payload.op) pushRows();
      const orderAs = row.orderAs !== undefined ? { orderAs: row.orderAs } : {};
      const expect = row.expect !== undefined ? { expect: row.expect } : {};
      const listPlace = row.listPlace !== undefined ? { listPlace: row.listPlace } : {};
      const undo = row.undo !== undefined ? { undo: row.undo } : {};
      const planned = row.planned !== undefined ? { planned: row.planned } : {};
      const note = row.skippedFields?.length ? { note: skippedFieldsNote(row.skippedFields) } : {};
      open.push({
        ...placeOf(row),
        payload: row.payload,
        original: row.original,
        ...round,
        ...orderAs,
        ...expect,
        ...listPlace,
        ...undo,
        ...planned,
        ...note,
      });
      if (open.length >= rowsPerJob || row.payload.op === 'deal.create') pushRows();
    }
    if (jobRows >= chunkSize) await flushJobs();
    if (results.length >= 500) await flushResults();
    if (progress.read % 1000 === 0) options.onProgress?.(progress);
  }
  for (const batch of invites.values()) pushInviteBatch(batch);
  pushRows();
  await flushJobs();
  await flushResults();
  const columns = options.sourceColumns;
  if (columns && stopNow() === undefined) await redisStep(() => store.markSourceRead(runId, columns()));
  options.onProgress?.(progress);
  return progress;
}

function inviteKey(options: InviteOptions): string {
  return JSON.stringify([
    options.organization_role ?? null,
    options.invited_by ?? null,
    options.send_invitation_email ?? null,
  ]);
}

/** How many waiting jobs hold about `rows` rows, at `rowsPerJob` rows each (at least one job). */
export function jobsForRows(rows: number, rowsPerJob: number): number {
  return Math.max(1, Math.ceil(rows / Math.max(1, rowsPerJob)));
}

/** How often `redisWatch` is asked while the producer waits for room. */
const REDIS_WATCH_EVERY_MS = 1000;

/**
 * Resolves once fewer than `maxJobs` jobs wait in the queue and `redisWatch` (if given) says go,
 * or the run is stopped (polls; logs once if it is paused). `redisWatch` may throw: then so does
 * this. Without it, a producer held here while Redis evicted keys (the workers stop taking jobs,
 * so the queue never drains) waited for good, saying nothing.
 */
export async function waitForRoom(
  queue: WorkspaceQueue,
  maxJobs: number,
  logger: Logger,
  signal?: AbortSignal,
  redisWatch?: () => Promise<'go' | 'hold'>,
): Promise<void> {
  let warned = false;
  let looked = 0;
  let hold = false;
  for (;;) {
    if (signal?.aborted) return;
    if (redisWatch && Date.now() - looked >= REDIS_WATCH_EVERY_MS) {
      looked = Date.now();
      hold = (await redisWatch()) === 'hold';
    }
    if (!hold && (await pendingJobCount(queue)) < maxJobs) return;
    if (!hold && !warned && (await queue.isPaused())) {
      logger.warn(
        { workspace: workspaceOfQueue(queue.name) },
        'workspace queue is paused (blocked run?); waiting for it to resume',
      );
      warned = true;
    }
    await sleep(100);
  }
}

/** `sent without Stage (stage_id): "Negotiaton" is not a stage …` ("onUnknown": "skip-field"). */
export function skippedFieldsNote(errors: readonly FieldError[]): string {
  return `sent without ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')} ("onUnknown": "skip-field")`;
}
