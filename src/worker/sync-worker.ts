import { isCreatePayload } from '../crm/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { isInviteBatch, toJobData, workspaceOfQueue, type SyncJobData, type WorkspaceQueue } from '../queue/index.js';
import { isEvictionReason, type RedisFullGuard } from '../redis/index.js';
import { annotateBatchSpan } from '../telemetry/index.js';
import { processInvites } from './invites.js';
import type { JobLockWatch } from './job-locks.js';
import { processRows } from './row-jobs.js';
import type { SyncWorkerOptions } from './sync-worker-options.js';
import type { WorkerCore } from './worker-core.js';
import type { SyncJob, SyncJobWorker } from './sync-job.js';
import { buildWorkerParts, type SyncWorkerParts } from './worker-parts.js';

/**
 * Processes one workspace's queue. Safe under at-least-once delivery and partitions: every
 * write goes through the write fence (this attempt still holds the job, the row has no result,
 * no later row for the record was applied), and every result is stored only by the attempt
 * that still holds the job (docs/architecture.md, "Delivery guarantees").
 */
export class SyncWorker {
  readonly queue: WorkspaceQueue;
  readonly worker: SyncJobWorker;
  readonly #parts: SyncWorkerParts;
  readonly #core: WorkerCore;
  readonly #logger: Logger;
  readonly #locks: JobLockWatch;
  readonly #full: RedisFullGuard;
  /**
   * Runs whose jobs this worker took (newest last, bounded): when Redis evicts keys, the
   * eviction watch fails these by their key, since their index entries may be gone.
   */
  readonly runsSeen = new Set<string>();
  /** When a job's status read last found each run sending (#stoppedRun), local ms. */
  readonly #sendingAt = new Map<string, number>();
  /** Jobs this process is working on, by id. */
  readonly #active = new Map<string, SyncJob>();
  #jobDataGone = false;

  private constructor(parts: SyncWorkerParts) {
    this.#parts = parts;
    this.#core = parts.core;
    this.#logger = parts.logger;
    this.queue = parts.core.parts.queue;
    // Three parameters: BullMQ hands the processor an AbortSignal only when it declares one.
    const opened = parts.openWorker((job, token, signal) => this.#process(job, token, signal));
    this.worker = opened.worker;
    this.#locks = opened.locks;
    this.#full = opened.full;
    this.worker.on('failed', (job, err) => {
      if (job) void parts.sweep.record(job, err.message);
    });
    this.worker.on('error', (err) => this.#onWorkerError(err));
  }

  /** Jobs this process is working on for the workspace now. */
  get busy(): number {
    return this.#active.size;
  }

  /** Starts taking jobs. */
  static async start(options: SyncWorkerOptions): Promise<SyncWorker> {
    const w = new SyncWorker(buildWorkerParts(options));
    // The budget counts requests, not jobs: a job limit an older version set would throttle
    // batches of rows as if each were one request.
    await w.queue.removeGlobalRateLimit();
    void w.worker.run().catch((err: unknown) => w.#logger.error({ err: errorMessage(err) }, 'worker stopped'));
    await w.worker.waitUntilReady();
    w.#parts.sweep.start();
    w.#core.parts.breaker.start();
    const rateLimit = w.#parts.rateLimit ?? 'adaptive';
    w.#logger.info({ concurrency: w.worker.concurrency, rateLimit }, 'worker started');
    return w;
  }

  /**
   * Stops taking jobs, lets in-flight ones finish (bounded), closes. BullMQ's close has no
   * timeout, and once a graceful close is under way a forced one returns that same pending
   * promise; so every step here has its own bound, and whatever Redis does (refused,
   * blackholed, half-open) this returns within closeTimeoutMs plus a few seconds.
   */
  async close(): Promise<void> {
    const sweeping = this.#parts.sweep.stop();
    this.#core.parts.breaker.stop();
    this.#locks.stop();
    const timeoutMs = this.#parts.closeTimeoutMs;
    // A failed-job sweep under way ends too before the connections close under it (it never rejects).
    if ((await within(Promise.all([this.worker.close(), sweeping]), timeoutMs)) === 'timeout') {
      this.#logger.warn({ timeoutMs }, 'in-flight jobs did not finish in time; they will be retried by another worker');
      // Aborts their requests: nothing this process sends after now can be recorded anyway.
      for (const id of this.#active.keys()) this.worker.cancelJob(id, 'shutting down');
    }
    // One bound for all the forced steps: each waits on Redis, which may not answer at all.
    const closed = Promise.all([this.worker.close(true), this.queue.close()]);
    if ((await within(closed, FORCED_STEP_MS)) === 'timeout') {
      this.#logger.warn('the worker did not close (Redis unreachable?): dropping its connections');
      void within(this.worker.disconnect(), FORCED_STEP_MS);
    }
    this.#core.parts.client.close();
  }

  async #process(job: SyncJob, token: string | undefined, signal: AbortSignal | undefined): Promise<void> {
    const id = job.id ?? '';
    this.#locks.track(id);
    this.#active.set(id, job);
    try {
      const data = toJobData(job.data);
      if (!intactJobData(data)) return this.#onJobDataGone(job);
      this.#sawRun(data.runId);
      annotateBatchSpan(workspaceOfQueue(this.queue.name), { name: job.name, data });
      if (await this.#stoppedRun(job, data, token ?? '')) return;
      if (isInviteBatch(data)) return await processInvites(this.#core, job, data, token ?? '', signal);
      return await processRows(this.#core, job, data, token ?? '', signal);
    } catch (err) {
      this.#full.onError(err);
      throw err;
    } finally {
      this.#locks.untrack(id);
      this.#active.delete(id);
    }
  }

  /**
   * A job of a run that stopped sending: cancelled (queued by a producer just as the cancel
   * removed the waiting ones, or taken from a blocked queue), failed because Redis evicted keys
   * (REDIS_EVICTS: its way on is a reconciled import, which must not meet rows this run still
   * sends), or gone from Redis. It sends nothing: its rows without a result are recorded
   * (WorkerCore.recordStopped), through the fence like any result. One HMGET per job — but for a
   * job of plain updates of a run this process found sending less than STATUS_TRUST_MS ago: the
   * write fence's first call answers the same (it refuses every row of a stopped run, and
   * processRows records the rest), so the read only cost each job a round trip in series (0.1 of
   * a row's 1.3 at 10 rows a job). Rows that spend anything before their fence call (a planned
   * row's drift read, a create's token) and invite batches are always read first; a plain row's
   * before-values read goes beside its fence call, and only when no pass of the last minute
   * serves it.
   */
  async #stoppedRun(job: SyncJob, data: SyncJobData, token: string): Promise<boolean> {
    const { store, fence, workspace } = this.#core.parts;
    const seen = this.#sendingAt.get(data.runId);
    if (seen !== undefined && Date.now() - seen < STATUS_TRUST_MS && plainUpdates(data)) return false;
    const run = await store.statusOf({ id: data.runId, workspace });
    if (
      run !== null &&
      run.status !== 'cancelled' &&
      !(run.status === 'failed' && isEvictionReason(run.reason ?? undefined))
    ) {
      this.#sendingAt.delete(data.runId);
      // Not a setting: far more runs than one workspace runs at once.
      if (this.#sendingAt.size >= 1000) this.#sendingAt.delete(this.#sendingAt.keys().next().value!);
      this.#sendingAt.set(data.runId, Date.now());
      return false;
    }
    this.#sendingAt.delete(data.runId);
    // A create whose answer was lost may have made its deal: never recorded "not sent". Its job
    // goes on to look for the deal (the fence lets a row with a marker look, and never POST).
    if (run !== null && !isInviteBatch(data)) {
      const inDoubt = await fence.createsInDoubt(
        data.runId,
        data.rows.map((r) => r.row),
      );
      if (inDoubt.size > 0) return false;
    }
    return this.#core.recordStopped(job, data.runId, token, data.rows);
  }

  #sawRun(runId: string): void {
    if (this.runsSeen.has(runId)) return;
    // Not a setting: far more runs than one workspace runs at once.
    if (this.runsSeen.size >= 1000) this.runsSeen.delete(this.runsSeen.values().next().value!);
    this.runsSeen.add(runId);
  }

  /** BullMQ's errors: a lock lost as a job finished is said as such, not as a connection error. */
  #onWorkerError(err: Error): void {
    const message = errorMessage(err);
    // BullMQ's job fetch (a write) refused for room: the guard pauses this worker with one line.
    if (this.#full.onError(err)) return;
    if (/could not renew lock for job/.test(message)) {
      this.#logger.debug({ err: message }, 'lock renewal refused (JobLockWatch has cancelled the job)');
      return;
    }
    const lost = /Missing lock for job (\S+)/.exec(message);
    if (lost) {
      this.#logger.warn(
        { jobId: lost[1] },
        'a job finished after losing its lock: results it could still store stand, the job runs again elsewhere and only its unstored rows are sent',
      );
      return;
    }
    this.#logger.warn({ err: message }, 'worker connection error (retrying)');
  }

  /**
   * A job whose data is gone from Redis (evicted, REDIS_EVICTS: its hash went, its id stayed in a
   * list) has no row to send or record: said once per worker, never a failure per job.
   */
  #onJobDataGone(job: SyncJob): void {
    if (this.#jobDataGone) return;
    this.#jobDataGone = true;
    this.#logger.error(
      { jobId: job.id },
      'a job came without its rows: Redis lost its data (evicted keys? [REDIS_EVICTS]); such jobs are dropped, their rows have no result. Set maxmemory-policy noeviction',
    );
  }
}

/**
 * How long a status read that found a run sending spares its next jobs of plain updates the read
 * (#stoppedRun): within it, a cancel is still met at the write fence, before any request.
 */
const STATUS_TRUST_MS = 5000;

/** Update rows that spend nothing before their fence call: no drift check, no create's token. */
function plainUpdates(data: SyncJobData): boolean {
  if (isInviteBatch(data)) return false;
  return data.rows.every((r) => !isCreatePayload(r.payload) && r.expect === undefined && r.planned === undefined);
}

/** False for job data whose hash Redis dropped (every field read back empty). */
function intactJobData(data: SyncJobData): boolean {
  return (
    typeof data.runId === 'string' &&
    Array.isArray(data.rows) &&
    data.rows.every((r) => Number.isInteger((r as { row?: unknown } | undefined)?.row))
  );
}

/** Bound of close()'s forced steps together (BullMQ's forced close and the queue's close). */
const FORCED_STEP_MS = 2000;

/** Resolves with the promise's value, or 'timeout' after `ms` (the promise is left to settle). */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([promise.catch(() => undefined as T), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
