import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS, resolveSettings } from '../config/index.js';
import { isInvitePayload } from '../crm/index.js';
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
import type { QueuedRow } from '../queue/index.js';
import { FIRST_ROUND, workspaceOfQueue } from '../queue/index.js';
import { rideOutRedis } from '../redis/index.js';
import { JobGroups, type PendingJob } from './job-groups.js';
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
  const producer = new RunProducer(options);
  for await (const row of rows) {
    // A cancelled run reads no further: its rows not read have no result and are not counted.
    if (producer.readsNoFurther()) break;
    await producer.take(row);
  }
  return producer.finish();
}

/** Results held before they are recorded, at most. */
const RESULTS_CHUNK = 500;
/** Rows read between two progress reports. */
const PROGRESS_EVERY = 1000;

/** One production of a run: its rows routed to results or jobs, both flushed in chunks. */
class RunProducer {
  readonly progress: ProducerProgress = { read: 0, queued: 0, invalid: 0, again: 0 };
  readonly #o: ProducerOptions;
  readonly #chunkSize: number;
  readonly #highWater: number;
  readonly #logger: Logger;
  readonly #board: WorkBoard;
  readonly #jobs: JobGroups;
  /** A retry's rows carry its round: the run store lets only that round's job write them. */
  readonly #round: { round?: number };
  #results: RowResult[] = [];
  /** The names rows gave for ids they send, each (field, id) once per producer (RunStore.addNames). */
  #names: SentName[] = [];
  readonly #namesSeen = new Set<string>();
  /** A cancel the store reported (addQueued refused) when no signal said so yet. */
  #refused: RunStop | undefined;
  /**
   * Rows the run counts as queued whose jobs did not reach the queue yet: a chunk is counted
   * before its jobs are added (a worker may finish one before addBulk returns), so a step that
   * stopped between the two leaves them. `runs resume` queues them (up to `producedRow`).
   */
  #countedNotQueued = 0;

  constructor(options: ProducerOptions) {
    const settings = resolveSettings(options, {
      chunkSize: DEFAULTS.producer.chunkSize,
      highWaterMark: DEFAULTS.producer.highWaterMark,
      inviteBatchSize: DEFAULTS.producer.inviteBatchSize,
      rowsPerJob: DEFAULTS.producer.rowsPerJob,
    });
    this.#o = options;
    this.#chunkSize = settings.chunkSize;
    this.#highWater = settings.highWaterMark;
    this.#logger = options.logger ?? silentLogger;
    this.#board = new WorkBoard({ redis: options.store.redis, prefix: options.store.prefix });
    // A retry names its own generation; without one, this is the run's first production.
    const generation = options.generation ?? FIRST_ROUND;
    this.#round = generation === FIRST_ROUND ? {} : { round: generation };
    this.#jobs = new JobGroups(options.runId, generation, {
      rowsPerJob: settings.rowsPerJob,
      inviteBatchSize: settings.inviteBatchSize,
    });
  }

  /** Not a retry's: its source already took each row out of the store, so each must be recorded. */
  readsNoFurther(): boolean {
    return !this.#o.requeued && this.#stopNow()?.kind === 'cancelled';
  }

  async take(row: ProducedRow): Promise<void> {
    this.progress.read += 1;
    this.#route(row);
    if (this.#jobs.readyRows >= this.#chunkSize) await this.#flushJobs();
    if (this.#results.length >= RESULTS_CHUNK) await this.#flushResults();
    if (this.progress.read % PROGRESS_EVERY === 0) this.#o.onProgress?.(this.progress);
  }

  async finish(): Promise<ProducerProgress> {
    this.#jobs.closeAll();
    await this.#flushJobs();
    await this.#flushResults();
    const columns = this.#o.sourceColumns;
    if (columns && this.#stopNow() === undefined)
      await this.#redisStep(() => this.#o.store.markSourceRead(this.#o.runId, columns()));
    this.#o.onProgress?.(this.progress);
    return this.progress;
  }

  /** A row's way: a result decided now (an outcome, invalid, a dry run, a stop), or a job. */
  #route(row: ProducedRow): void {
    const stop = this.#stopNow();
    if (row.outcome) {
      const o = row.outcome;
      this.#results.push(
        o.status === 'skipped'
          ? skipped(row, o.message, o.recordId)
          : failed(row, { code: o.code, message: o.message, recordId: o.recordId }, row.original),
      );
    } else if (!row.payload) {
      this.progress.invalid += 1;
      this.#results.push(invalid(row, row.errors ?? [], row.original, row.code ?? 'ROW_INVALID'));
    } else if (this.#o.dryRun) {
      const left = row.skippedFields?.length ? `; ${skippedFieldsNote(row.skippedFields)}` : '';
      this.#results.push(skipped(row, `dry run: valid, not sent${left}`));
    } else if (stop !== undefined) {
      this.#results.push(stoppedResult(stop, row, row.original));
    } else if (isInvitePayload(row.payload)) {
      const invite = { ...placeOf(row), email: row.payload.email, original: row.original, ...this.#round };
      this.#jobs.addInvite(invite, row.payload);
    } else {
      if (row.names) this.#names.push(...newNames(row.names, this.#namesSeen));
      this.#jobs.addRow(queuedRowOf(row, row.payload, this.#round));
    }
  }

  #stopNow(): RunStop | undefined {
    return stopOf(this.#o.signal) ?? this.#refused;
  }

  #whereItStands(): string {
    const p = this.progress;
    return (
      `${p.read} rows read, ${p.queued} of them in the queue` +
      (this.#countedNotQueued > 0
        ? `; the run counts ${this.#countedNotQueued} more as queued that did not reach the queue (runs resume queues them)`
        : '')
    );
  }

  /** Every Redis step of the producer is safe to repeat, so a Redis restart or partition is waited out. */
  #redisStep<T>(step: () => Promise<T>): Promise<T> {
    const { runId, redisOutageMs } = this.#o;
    return rideOutRedis(step, {
      logger: this.#logger,
      ...(redisOutageMs !== undefined ? { outageMs: redisOutageMs } : {}),
      giveUp: (waited, last) =>
        new CrmSyncError(
          'REDIS_LOST',
          `Redis did not answer for ${Math.round(waited / 1000)} s while run ${runId} was being produced (${this.#whereItStands()}). ` +
            `Nothing queued is lost: once Redis answers, go on from where it stopped with: crm-sync runs resume ${runId}`,
          { cause: last },
        ),
      full: (waited, err) =>
        new CrmSyncError(
          'REDIS_FULL',
          `Redis stayed full (maxmemory reached) for ${Math.round(waited / 1000)} s while run ${runId} was being produced (${this.#whereItStands()}); ` +
            `no row was sent that cannot be recorded. Free memory or raise maxmemory, then go on with: crm-sync runs resume ${runId}`,
          { cause: err },
        ),
    });
  }

  async #flushResults(): Promise<void> {
    if (this.#results.length === 0) return;
    let batch = this.#results;
    this.#results = [];
    const { store, runId, requeued } = this.#o;
    // A retry's create may have made its deal in an earlier round (its marker is set): stopped
    // before it was queued, it is never recorded "not sent" (which invites an import again).
    if (requeued) batch = await this.#redisStep(() => this.#keepInDoubt(batch));
    await this.#redisStep(() => store.recordResults(runId, batch, { fromQueue: requeued ?? false }));
  }

  async #keepInDoubt(batch: RowResult[]): Promise<RowResult[]> {
    const isStopped = (r: RowResult) => r.status === 'cancelled' || r.code === 'RUN_ABORTED';
    const stop = this.#stopNow();
    const rows = batch.filter(isStopped).map((r) => r.row);
    if (stop === undefined || rows.length === 0) return batch;
    const { store, runId, queue } = this.#o;
    const doubt = await createsInDoubt(store, { id: runId, workspace: workspaceOfQueue(queue.name) }, rows);
    return batch.map((r) =>
      isStopped(r) && doubt.has(r.row)
        ? stoppedInDoubt(stop, { row: r.row, line: r.line, ...(r.ref !== undefined ? { ref: r.ref } : {}) }, r.original)
        : r,
    );
  }

  async #flushJobs(): Promise<void> {
    const { jobs: batch, rows: count } = this.#jobs.take();
    if (batch.length === 0) return;
    const { queue, signal, redisWatch } = this.#o;
    // The mark counts rows, the queue counts jobs: convert with this chunk's rows per job
    // (creates go one per job, invites and updates several).
    await this.#redisStep(() =>
      waitForRoom(queue, jobsForRows(this.#highWater, count / batch.length), this.#logger, signal, redisWatch),
    );
    const stop = this.#stopNow();
    if (stop !== undefined) return this.#held(batch, stop);
    // Before the jobs exist: a result read as soon as it is stored finds its names.
    if (this.#names.length > 0) {
      const adding = this.#names;
      this.#names = [];
      await this.#redisStep(() => this.#o.store.addNames(this.#o.runId, adding));
    }
    const rowsOf = batch.flatMap((j): Array<{ row: number }> => j.data.rows);
    // Not a setting: without a resume, no row was counted by an earlier producer.
    const counted = rowsOf.filter((r) => r.row > (this.#o.countedThrough ?? 0)).length;
    // Update and create jobs are flushed in row order, so their highest row marks how far the
    // producer got; invite batches fill by options and are flushed out of order.
    const through = batch.every((j) => j.inRowOrder) ? Math.max(...rowsOf.map((r) => r.row)) : undefined;
    if (!(await this.#addJobs(batch, counted, through))) {
      this.#refused = {
        kind: 'cancelled',
        reason: (await this.#o.store.requireRun(this.#o.runId)).reason ?? 'cancelled',
      };
      return this.#held(batch, this.#refused);
    }
    this.progress.queued += count;
    this.progress.again += rowsOf.length - counted;
  }

  /** Rows held here when the run stopped would otherwise reach the CRM after it. */
  #held(batch: PendingJob[], stop: RunStop): void {
    this.#results.push(...batch.flatMap((j) => j.data.rows.map((r): RowResult => stoppedResult(stop, r, r.original))));
  }

  /** Counts a chunk's rows, then adds its jobs; false when the run was cancelled meanwhile. */
  #addJobs(batch: PendingJob[], counted: number, through: number | undefined): Promise<boolean> {
    const { store, runId, queue, requeued } = this.#o;
    const workspace = workspaceOfQueue(queue.name);
    return this.#redisStep(async () => {
      // Count first (a worker may finish a job before addBulk returns); counted once per row
      // even when this step is repeated, and job ids make a repeated addBulk add nothing new.
      if (!requeued && counted > 0 && (await store.addQueued(runId, counted, through)) === 'cancelled') return false;
      this.#countedNotQueued = counted;
      // A retry's rows were counted when they were requeued: ask the run's status instead.
      if (requeued && (await store.getStatus(runId)) === 'cancelled') return false;
      await addTracedBatches(
        workspace,
        batch.map(({ name, data, opts }) => ({ name, data, opts })),
        (jobs) => queue.addBulk(jobs),
      );
      this.#countedNotQueued = 0;
      // After the jobs exist: an idle pool starts a worker for the workspace (WorkBoard).
      await this.#board.signal(workspace);
      return true;
    });
  }
}

/** A valid row as its job carries it: its place, payload and values, and what the producer was told of it. */
function queuedRowOf(row: ProducedRow, payload: QueuedRow['payload'], round: { round?: number }): QueuedRow {
  const orderAs = row.orderAs !== undefined ? { orderAs: row.orderAs } : {};
  const expect = row.expect !== undefined ? { expect: row.expect } : {};
  const listPlace = row.listPlace !== undefined ? { listPlace: row.listPlace } : {};
  const undo = row.undo !== undefined ? { undo: row.undo } : {};
  const planned = row.planned !== undefined ? { planned: row.planned } : {};
  const note = row.skippedFields?.length ? { note: skippedFieldsNote(row.skippedFields) } : {};
  return {
    ...placeOf(row),
    payload,
    original: row.original,
    ...round,
    ...orderAs,
    ...expect,
    ...listPlace,
    ...undo,
    ...planned,
    ...note,
  };
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
