import { setTimeout as sleep } from 'node:timers/promises';
import type { InviteOptions } from '../crm/index.js';
import type { IngestedRow } from '../ingest/index.js';
import { CrmSyncError } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { RowResult, RunStore } from '../runs/index.js';
import { addTracedBatches } from '../telemetry/index.js';
import type { InviteBatchJobData, InviteRow, QueuedRow, SyncJobData, SyncJobName } from './job-data.js';
import { rowJobId } from './queue-names.js';
import { rideOutRedis } from './ride-out-redis.js';
import { pendingJobCount, type WorkspaceQueue } from './workspace-queue.js';

export interface ProducerOptions {
  queue: WorkspaceQueue;
  store: RunStore;
  runId: string;
  /** Rows per `addBulk` call (whole jobs: a chunk ends with the job that reaches it). Default 500. */
  chunkSize?: number;
  /**
   * Reading pauses while the workspace queue holds about this many waiting rows (waiting jobs ×
   * rows per job). Default 10,000.
   */
  highWaterMark?: number;
  /** Emails per team-members request. Default 50. */
  inviteBatchSize?: number;
  /** Update rows per job (the workspace's `rowsPerJob`; creates always go alone). Default 1. */
  rowsPerJob?: number;
  /** Retry generation, part of job ids so a retry is not deduped against the first try. Default 0. */
  generation?: number;
  /** Validate and record only; send nothing (valid rows end `skipped`, "dry run"). Default false. */
  dryRun?: boolean;
  /** The rows were already counted as queued (a retry, after `requeueRows`). Default false. */
  requeued?: boolean;
  /**
   * Asked before each chunk goes to the queue; a reason means the run was aborted, and the
   * chunk's rows are recorded failed (RUN_ABORTED) instead of sent. Default: never.
   */
  shouldStop?: () => string | undefined;
  logger?: Logger;
  onProgress?: (progress: ProducerProgress) => void;
  /**
   * While Redis does not answer (a restart, a partition) the producer waits and repeats its
   * step, up to this long; then it stops with REDIS_LOST, saying how to resume. Default 60000 ms.
   */
  redisOutageMs?: number;
  /** Rows up to this one were queued by an earlier producer of the run (a resume): not counted again. Default 0. */
  countedThrough?: number;
}

export interface ProducerProgress {
  read: number;
  queued: number;
  invalid: number;
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

/** What the producer consumes: an ingested row, optionally with a decided outcome. */
export type ProducedRow = IngestedRow & { outcome?: RowOutcome };

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
export async function produceRun(rows: AsyncIterable<ProducedRow>, options: ProducerOptions): Promise<ProducerProgress> {
  const { queue, store, runId } = options;
  const chunkSize = options.chunkSize ?? 500;
  const highWater = options.highWaterMark ?? 10_000;
  const batchSize = options.inviteBatchSize ?? 50;
  const rowsPerJob = Math.max(1, options.rowsPerJob ?? 1);
  const generation = options.generation ?? 0;
  // A retry's rows carry its round: the run store lets only that round's job write them.
  const round = generation === 0 ? {} : { round: generation };
  const logger = options.logger ?? silentLogger;
  const progress: ProducerProgress = { read: 0, queued: 0, invalid: 0 };
  let jobs: PendingJob[] = [];
  let jobRows = 0;
  let results: RowResult[] = [];
  const invites = new Map<string, { options: InviteOptions; rows: InviteRow[] }>();
  // Update rows of one operation waiting to fill a job (reconcile mixes creates and updates).
  let open: QueuedRow[] = [];

  // Every Redis step below is safe to repeat, so a Redis restart or partition is waited out.
  const redisStep = <T>(step: () => Promise<T>) =>
    rideOutRedis(step, {
      logger,
      ...(options.redisOutageMs !== undefined ? { outageMs: options.redisOutageMs } : {}),
      giveUp: (waited, last) =>
        new CrmSyncError(
          'REDIS_LOST',
          `Redis did not answer for ${Math.round(waited / 1000)} s while run ${runId} was being produced (${progress.read} rows read, ${progress.queued} queued). ` +
            `Nothing queued is lost: once Redis answers, go on from where it stopped with: crm-sync runs resume ${runId}`,
          { cause: last },
        ),
      full: (err) =>
        new CrmSyncError(
          'REDIS_FULL',
          `Redis is full (maxmemory reached) while run ${runId} was being produced (${progress.read} rows read, ${progress.queued} queued); ` +
            `no row was sent that cannot be recorded. Free memory or raise maxmemory, then go on with: crm-sync runs resume ${runId}`,
          { cause: err },
        ),
    });
  const flushResults = async () => {
    if (results.length === 0) return;
    const batch = results;
    results = [];
    await redisStep(() => store.recordResults(runId, batch, { fromQueue: options.requeued ?? false }));
  };
  const flushJobs = async () => {
    if (jobs.length === 0) return;
    const batch = jobs;
    const count = jobRows;
    jobs = [];
    jobRows = 0;
    // The mark counts rows, the queue counts jobs: convert with this chunk's rows per job
    // (creates go one per job, invites and updates several).
    await redisStep(() => waitForRoom(queue, jobsForRows(highWater, count / batch.length), logger));
    const stop = options.shouldStop?.();
    if (stop !== undefined) {
      // Rows held here when the run was aborted would otherwise reach the CRM after it.
      results.push(...batch.flatMap((j) => abortedResults(j.data, stop)));
      return;
    }
    const rowsOf = batch.flatMap((j): Array<{ row: number }> => j.data.rows);
    const counted = rowsOf.filter((r) => r.row > (options.countedThrough ?? 0)).length;
    // Update and create jobs are flushed in row order, so their highest row marks how far the
    // producer got; invite batches fill by options and are flushed out of order.
    const through = batch.some((j) => j.name === 'team.invite') ? undefined : Math.max(...rowsOf.map((r) => r.row));
    await redisStep(async () => {
      // Count first (a worker may finish a job before addBulk returns); counted once per row
      // even when this step is repeated, and job ids make a repeated addBulk add nothing new.
      if (!options.requeued && counted > 0) await store.addQueued(runId, counted, through);
      await addTracedBatches(queue.name, batch.map(({ name, data, opts }) => ({ name, data, opts })), (jobs) => queue.addBulk(jobs));
    });
    progress.queued += count;
  };
  const pushJob = (job: PendingJob) => {
    jobs.push(job);
    jobRows += job.rows;
  };
  const pushInviteBatch = (batch: { options: InviteOptions; rows: InviteRow[] }) => {
    const first = batch.rows[0];
    if (!first) return;
    const data: InviteBatchJobData = { runId, rows: batch.rows, options: batch.options };
    pushJob({ name: 'team.invite', data, opts: { jobId: rowJobId(runId, first.row, generation) }, rows: batch.rows.length });
  };
  const pushRows = () => {
    const first = open[0];
    if (!first) return;
    pushJob({ name: first.payload.op, data: { runId, rows: open }, opts: { jobId: rowJobId(runId, first.row, generation) }, rows: open.length });
    open = [];
  };

  for await (const row of rows) {
    progress.read += 1;
    const at = new Date().toISOString();
    if (row.outcome) {
      const o = row.outcome;
      results.push({
        row: row.row,
        line: row.line,
        status: o.status,
        message: o.message,
        ...(o.code ? { code: o.code } : {}),
        ...(o.recordId ? { recordId: o.recordId } : {}),
        ...(o.status === 'failed' ? { original: row.original } : {}),
        at,
      });
    } else if (!row.payload) {
      progress.invalid += 1;
      results.push({
        row: row.row,
        line: row.line,
        status: 'invalid',
        code: row.code ?? 'ROW_INVALID',
        message: (row.errors ?? []).map((e) => `${e.field}: ${e.message}`).join('; ') || 'invalid row',
        errors: row.errors ?? [],
        original: row.original,
        at,
      });
    } else if (options.dryRun) {
      results.push({ row: row.row, line: row.line, status: 'skipped', message: 'dry run: valid, not sent', at });
    } else if (row.payload.op === 'team.invite') {
      const key = inviteKey(row.payload.options);
      const batch = invites.get(key) ?? { options: row.payload.options, rows: [] };
      batch.rows.push({ row: row.row, line: row.line, email: row.payload.email, original: row.original, ...round });
      invites.set(key, batch);
      if (batch.rows.length >= batchSize) {
        pushInviteBatch(batch);
        invites.delete(key);
      }
    } else {
      if (open[0] && open[0].payload.op !== row.payload.op) pushRows();
      open.push({ row: row.row, line: row.line, payload: row.payload, original: row.original, ...round });
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
  options.onProgress?.(progress);
  return progress;
}

function abortedResults(data: SyncJobData, reason: string): RowResult[] {
  const at = new Date().toISOString();
  return data.rows.map((r) => ({ row: r.row, line: r.line, status: 'failed', code: 'RUN_ABORTED', message: `not sent: ${reason}`, original: r.original, at }));
}

function inviteKey(options: InviteOptions): string {
  return JSON.stringify([options.organization_role ?? null, options.invited_by ?? null, options.send_invitation_email ?? null]);
}

/** How many waiting jobs hold about `rows` rows, at `rowsPerJob` rows each (at least one job). */
export function jobsForRows(rows: number, rowsPerJob: number): number {
  return Math.max(1, Math.ceil(rows / Math.max(1, rowsPerJob)));
}

/** Resolves once fewer than `maxJobs` jobs wait in the queue (polls; logs once if it is paused). */
export async function waitForRoom(queue: WorkspaceQueue, maxJobs: number, logger: Logger): Promise<void> {
  let warned = false;
  for (;;) {
    const pending = await pendingJobCount(queue);
    if (pending < maxJobs) return;
    if (!warned && (await queue.isPaused())) {
      logger.warn({ queue: queue.name }, 'workspace queue is paused (blocked run?); waiting for it to resume');
      warned = true;
    }
    await sleep(100);
  }
}
