import { DelayedError, RateLimitError, Worker, type Job } from 'bullmq';
import type { RedisClient } from '../redis/index.js';
import {
  AuthError,
  CrmError,
  TransientError,
  RateLimitedError,
  RejectedError,
  isPermanent,
  type CrmClient,
} from '../crm/index.js';
import { bullPrefix, probeKey, requestBudgetKey } from '../keys/index.js';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import { METRIC, type MetricsRecorder } from '../metrics/index.js';
import {
  isInviteBatch,
  isRedisFull,
  openWorkspaceQueue,
  queueName,
  workspaceOfQueue,
  SharedTokenBucket,
  blockWorkspace,
  holdUnreachable,
  liftUnreachable,
  type InviteBatchJobData,
  type QueuedRow,
  type RowBatchJobData,
  toJobData,
  type SyncJobData,
  type SyncJobName,
  type WorkspaceQueue,
} from '../queue/index.js';
import { DealLookup, DuplicateSafeCreate } from './creates/index.js';
import {
  LookupPassBoard,
  RowFence,
  cancelled,
  placeOf,
  succeeded,
  type OrderSettlement,
  type RowResult,
  type RowWriter,
  type RunStore,
} from '../runs/index.js';
import { annotateBatchSpan, bullmqTelemetry } from '../telemetry/index.js';
import { checkKey } from '../runtime/index.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { CrmOutageWatch } from './crm-outage-watch.js';
import { FailedJobSweep } from './failed-job-sweep.js';
import { RedisFullGuard } from './redis-full-guard.js';
import { JobLockWatch } from './job-locks.js';
import { ResultWriter, type FencedResult } from './result-writer.js';
import { RowSender } from './row-sender.js';
import { splitInviteBatch } from './invite-split.js';
import { failureResult, jitter } from './row-results.js';

export interface SyncWorkerOptions {
  workspace: string;
  client: CrmClient;
  store: RunStore;
  /** A connection made with role `worker` (waits through Redis restarts). */
  connection: RedisClient;
  /** Key prefix from the config. */
  prefix: string;
  /**
   * The key's known rate limit, enforced for all worker processes together through Redis: every
   * request takes a token from the workspace's shared bucket. Default: none — the bucket's rate
   * is learned from 429s, shared by the workspace's processes and remembered between runs.
   */
  rateLimit?: { max: number; durationMs: number };
  /** Jobs in flight in this process. Default 8. */
  concurrency?: number;
  /** Starts of one job, counting 429 requeues, before it fails for good. Default 100. */
  maxStartedAttempts?: number;
  /** Job lock; a crashed worker's jobs return to the queue after it. Default 30000 ms. */
  lockDurationMs?: number;
  /** How often to look for jobs of crashed workers. Default lockDurationMs. */
  stalledIntervalMs?: number;
  /** Graceful close waits this long for in-flight requests, then gives up on them. Default 30000 ms. */
  closeTimeoutMs?: number;
  /** The workspace's transient-retry policy, for jobs this worker adds (invite halves). Default 6 / 1000 ms. */
  retry?: { attempts: number; backoffMs: number };
  /** How often jobs BullMQ failed by itself are checked for a missing row result. Default 60000 ms. */
  sweepIntervalMs?: number;
  /** A run whose producer was silent this long is failed (its process died mid-file). Default 120000 ms. */
  producerSilenceMs?: number;
  /** Wait before looking for the deal of a create whose answer was lost. Default 30000 ms. */
  createSettleMs?: number;
  /** The config's retention: create markers and deal claims live as long as a run can be retried. Default 30 days. */
  retentionMs?: number;
  /** Deal fields the CRM's automation may set on a new deal: a look-up does not compare them. Default none. */
  automationFields?: readonly string[];
  /** How long a record remembers the last row applied to it (write order). Default 24 h. */
  orderWindowMs?: number;
  /**
   * How long a write may be on the wire before it counts as applied (the CRM request timeout
   * plus a margin for a network that delivers late). Default 30000 ms.
   */
  writeLeaseMs?: number;
  /**
   * Circuit breaker (docs/architecture.md, "Circuit breaker"): unreachable failures in a row
   * that hold the workspace (default 5), and how often a held workspace is probed (default 15000 ms).
   */
  breaker?: { threshold?: number; probeEveryMs?: number };
  /** The CRM failing this long with no success is one warning with counts. Default 30000 ms. */
  outageWarningMs?: number;
  logger?: Logger;
  /** Fleet-wide counters for the dashboard's /metrics. Default: none. */
  metrics?: MetricsRecorder;
}

type SyncJob = Job<SyncJobData, unknown, SyncJobName>;

/** What an error means for the job: pause the workspace (429, 401), retry later, or a final failure. */
type Verdict =
  | { kind: 'rate-limited'; err: RateLimitedError }
  | { kind: 'blocked'; err: AuthError }
  /** The circuit breaker holds the workspace: the job goes back without spending an attempt. */
  | { kind: 'unreachable'; reason: string }
  | { kind: 'retry'; err: unknown }
  | { kind: 'fail'; err: unknown };
type PauseVerdict = Extract<Verdict, { kind: 'rate-limited' | 'blocked' | 'unreachable' }>;

/** A queued row's outcome: a result to store, or what else became of it. */
type RowOutcome =
  | { kind: 'done'; result: RowResult; settles?: OrderSettlement }
  | { kind: 'recorded' }
  | { kind: 'wait'; ms: number }
  /** The run was cancelled before the row's request went out (the write fence said so). */
  | { kind: 'cancelled' }
  | Exclude<Verdict, { kind: 'fail' }>;

/** The job is no longer this worker's (its lock is gone): nothing more is sent or stored. */
class JobLostError extends CrmSyncError {
  constructor(jobId: string | undefined, reason: string) {
    super(
      'JOB_LOST',
      `job ${jobId ?? '?'} is no longer this worker's (${reason}); its new owner sends the unsent rows`,
    );
  }
}

/**
 * Processes one workspace's queue. Safe under at-least-once delivery and partitions: every
 * write goes through the write fence (this attempt still holds the job, the row has no result,
 * no later row for the record was applied), and every result is stored only by the attempt
 * that still holds the job (docs/architecture.md, "Delivery guarantees").
 */
export class SyncWorker {
  readonly queue: WorkspaceQueue;
  readonly worker: Worker<SyncJobData, unknown, SyncJobName>;
  readonly #options: SyncWorkerOptions;
  readonly #logger: Logger;
  readonly #results: ResultWriter;
  readonly #maxStarts: number;
  readonly #sweep: FailedJobSweep;
  readonly #full: RedisFullGuard;
  readonly #fence: RowFence;
  readonly #sender: RowSender;
  readonly #locks: JobLockWatch;
  readonly #outage: CrmOutageWatch;
  readonly #breaker: CircuitBreaker;
  readonly #lockPrefix: string;
  /** The workspace's shared request budget (a known limit, or a learned rate). */
  readonly #bucket: SharedTokenBucket;
  /** Until when this process knows the workspace is paused by a 429 (epoch ms). */
  #pausedUntil = 0;
  /** Jobs this process is working on, by id. */
  readonly #active = new Map<string, SyncJob>();

  private constructor(options: SyncWorkerOptions) {
    this.#options = options;
    this.#logger = (options.logger ?? silentLogger).child({ workspace: options.workspace });
    this.#results = new ResultWriter(options.store);
    this.#fence = new RowFence({
      redis: options.connection,
      prefix: options.prefix,
      workspace: options.workspace,
      ...(options.orderWindowMs !== undefined ? { orderWindowMs: options.orderWindowMs } : {}),
      ...(options.writeLeaseMs !== undefined ? { leaseMs: options.writeLeaseMs } : {}),
      ...(options.retentionMs !== undefined ? { retentionMs: options.retentionMs } : {}),
    });
    this.#lockPrefix = `${bullPrefix(options.prefix)}:${queueName(options.workspace)}:`;
    // Every request, a row's or a lookup's list page, spends the same shared budget.
    this.#bucket = new SharedTokenBucket({
      redis: options.connection,
      key: requestBudgetKey(options.prefix, options.workspace),
      ...(options.rateLimit ? { limit: options.rateLimit } : {}),
    });
    const limiter = this.#bucket;
    const board = new LookupPassBoard({
      redis: options.connection,
      prefix: options.prefix,
      workspace: options.workspace,
    });
    const lookup = new DealLookup({
      client: options.client,
      fence: this.#fence,
      board,
      limiter,
      ...(options.createSettleMs !== undefined ? { minGapMs: options.createSettleMs } : {}),
      ...(options.automationFields ? { automationFields: options.automationFields } : {}),
      logger: this.#logger,
    });
    const creates = new DuplicateSafeCreate({
      client: options.client,
      fence: this.#fence,
      lookup,
      ...(options.createSettleMs !== undefined ? { settleMs: options.createSettleMs } : {}),
      logger: this.#logger,
    });
    this.#sender = new RowSender({ client: options.client, fence: this.#fence, creates, logger: this.#logger });
    const concurrency = options.concurrency ?? 8;
    this.queue = openWorkspaceQueue({
      connection: options.connection,
      prefix: options.prefix,
      workspace: options.workspace,
      ...(options.retry ? { attempts: options.retry.attempts, backoffMs: options.retry.backoffMs } : {}),
    });
    this.#maxStarts = options.maxStartedAttempts ?? 100;
    const lockDuration = options.lockDurationMs ?? 30_000;
    // Three parameters: BullMQ hands the processor an AbortSignal only when it declares one.
    this.worker = new Worker<SyncJobData, unknown, SyncJobName>(
      queueName(options.workspace),
      (job, token, signal) => this.#process(job, token, signal),
      {
        connection: options.connection,
        prefix: bullPrefix(options.prefix),
        concurrency,
        autorun: false,
        // One more than our own cap: the processor records the row's result on its last start
        // itself, so BullMQ failing the job on its own is only a backstop (FailedJobSweep).
        maxStartedAttempts: (options.maxStartedAttempts ?? 100) + 1,
        lockDuration,
        stalledInterval: options.stalledIntervalMs ?? lockDuration,
        maxStalledCount: 5,
        removeOnComplete: { age: 3600, count: 1000 },
        removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
        ...bullmqTelemetry(),
      },
    );
    this.worker.on('failed', (job, err) => {
      if (job) void this.#sweep.record(job, err.message);
    });
    this.worker.on('error', (err) => this.#onWorkerError(err));
    this.#locks = new JobLockWatch(this.worker, { lockDurationMs: lockDuration, logger: this.#logger });
    this.#full = new RedisFullGuard({
      worker: this.worker,
      redis: options.connection,
      probeKey: probeKey(options.prefix, options.workspace),
      logger: this.#logger,
    });
    this.#sweep = new FailedJobSweep({
      workspace: options.workspace,
      queue: this.queue,
      store: options.store,
      fence: this.#fence,
      write: (job, runId, results) => this.#store(job, runId, results),
      logger: this.#logger,
      ...(options.sweepIntervalMs !== undefined ? { intervalMs: options.sweepIntervalMs } : {}),
      ...(options.producerSilenceMs !== undefined ? { producerSilenceMs: options.producerSilenceMs } : {}),
    });
    this.#outage = new CrmOutageWatch({
      logger: this.#logger,
      rowsWaiting: () => this.#rowsWaiting(),
      ...(options.outageWarningMs !== undefined ? { thresholdMs: options.outageWarningMs } : {}),
    });
    const held = { queue: this.queue, store: options.store, workspace: options.workspace };
    this.#breaker = new CircuitBreaker({
      baseUrl: options.client.baseUrl,
      probe: () => checkKey(options.client),
      open: (reason) => holdUnreachable({ ...held, reason }),
      close: () => liftUnreachable(held),
      isOpen: async () => (await options.store.holds(options.workspace)).unreachable !== undefined,
      takeToken: () => this.#bucket.take(undefined),
      logger: this.#logger,
      ...(options.breaker?.threshold !== undefined ? { threshold: options.breaker.threshold } : {}),
      ...(options.breaker?.probeEveryMs !== undefined ? { probeEveryMs: options.breaker.probeEveryMs } : {}),
    });
  }

  /** Jobs this process is working on for the workspace now. */
  get busy(): number {
    return this.#active.size;
  }

  /** Starts taking jobs. */
  static async start(options: SyncWorkerOptions): Promise<SyncWorker> {
    const w = new SyncWorker(options);
    // The budget counts requests, not jobs: a job limit an older version set would throttle
    // batches of rows as if each were one request.
    await w.queue.removeGlobalRateLimit();
    void w.worker.run().catch((err: unknown) => w.#logger.error({ err: errorMessage(err) }, 'worker stopped'));
    await w.worker.waitUntilReady();
    w.#sweep.start();
    w.#breaker.start();
    w.#logger.info({ concurrency: w.worker.concurrency, rateLimit: options.rateLimit ?? 'adaptive' }, 'worker started');
    return w;
  }

  /**
   * Stops taking jobs, lets in-flight ones finish (bounded), closes. BullMQ's close has no
   * timeout, and once a graceful close is under way a forced one returns that same pending
   * promise; so every step here has its own bound, and whatever Redis does (refused,
   * blackholed, half-open) this returns within closeTimeoutMs plus a few seconds.
   */
  async close(): Promise<void> {
    this.#sweep.stop();
    this.#breaker.stop();
    this.#locks.stop();
    const timeoutMs = this.#options.closeTimeoutMs ?? 30_000;
    if ((await within(this.worker.close(), timeoutMs)) === 'timeout') {
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
    this.#options.client.close();
  }

  async #process(job: SyncJob, token: string | undefined, signal: AbortSignal | undefined): Promise<void> {
    const id = job.id ?? '';
    this.#locks.track(id);
    this.#active.set(id, job);
    try {
      const data = toJobData(job.data);
      if (!intactJobData(data)) return this.#onJobDataGone(job);
      annotateBatchSpan(workspaceOfQueue(this.queue.name), { name: job.name, data });
      if (await this.#cancelledRun(job, data, token ?? '')) return;
      if (isInviteBatch(data)) return await this.#processInvites(job, data, token ?? '', signal);
      return await this.#processRows(job, data, token ?? '', signal);
    } catch (err) {
      this.#full.onError(err);
      throw err;
    } finally {
      this.#locks.untrack(id);
      this.#active.delete(id);
    }
  }

  /**
   * A job of a cancelled run (queued by a producer just as the cancel removed the waiting
   * ones, or taken from a blocked queue) sends nothing: its rows without a result are recorded
   * `cancelled`, through the fence like any result. One HGET per job.
   */
  async #cancelledRun(job: SyncJob, data: SyncJobData, token: string): Promise<boolean> {
    if ((await this.#options.store.getStatus(data.runId)) !== 'cancelled') return false;
    // A create whose answer was lost may have made its deal: never recorded "not sent". Its job
    // goes on to look for the deal (the fence lets a row with a marker look, and never POST).
    if (
      !isInviteBatch(data) &&
      (
        await this.#fence.createsInDoubt(
          data.runId,
          data.rows.map((r) => r.row),
        )
      ).size > 0
    )
      return false;
    await this.#recordCancelled(job, data.runId, token, data.rows);
    return true;
  }

  /** Records `rows` of a cancelled run `cancelled`, but those that already have a result. */
  async #recordCancelled(
    job: SyncJob,
    runId: string,
    token: string,
    rows: Array<SyncJobData['rows'][number]>,
  ): Promise<void> {
    const reason = (await this.#options.store.getRun(runId))?.reason ?? 'the run was cancelled';
    // Rows an earlier start of the job sent keep their result (and need no refusal logged).
    const unsent = await this.#withoutResult(runId, rows);
    if (unsent.length > 0)
      await this.#store(
        job,
        runId,
        unsent.map((r) => ({ result: cancelled(r, reason, r.original), fence: this.#writer(job, runId, token, r) })),
      );
  }

  /** Rows of the workspace's running runs that have no result yet (the newest 200 runs). */
  async #rowsWaiting(): Promise<number> {
    const { runs } = await this.#options.store.listRuns({
      workspace: this.#options.workspace,
      status: 'running',
      limit: 200,
    });
    return runs.reduce((sum, run) => sum + run.counts.queued, 0);
  }

  /** The rows of `rows` that have no stored result yet (one HMGET). */
  async #withoutResult<R extends { row: number }>(runId: string, rows: R[]): Promise<R[]> {
    const stored = await this.#options.store.getResults(
      runId,
      rows.map((r) => r.row),
    );
    const done = new Set(stored.map((r) => r.row));
    return rows.filter((r) => !done.has(r.row));
  }

  /** The write fence's view of this job attempt sending row `r`. */
  #writer(job: SyncJob, runId: string, token: string, r: { row: number; round?: number; orderAs?: string }): RowWriter {
    const lockKey = `${this.#lockPrefix}${job.id ?? ''}:lock`;
    return { runId, row: r.row, round: r.round ?? 0, lockKey, token, ...(r.orderAs ? { orderAs: r.orderAs } : {}) };
  }

  /**
   * Sends a job's rows one request at a time, in order (so `concurrency` stays the requests in
   * flight), and stores their results together before the job completes. A 429 or 401 stops
   * the job: results so far are stored, the job keeps only its unsent rows and goes back to wait.
   */
  async #processRows(
    job: SyncJob,
    data: RowBatchJobData,
    token: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const results: FencedResult[] = [];
    const flaky: QueuedRow[] = [];
    const waiting: Array<{ row: QueuedRow; ms: number }> = [];
    let stop: PauseVerdict | { kind: 'paused' } | undefined;
    let cancelledRun = false;
    let next = 0;
    try {
      for (; next < data.rows.length; next++) {
        // Another job's 429 paused the workspace: stop here rather than run into it too. (Not
        // before the first row: the pause held back that start, and a start spent is a start.)
        if (next > 0 && Date.now() < this.#pausedUntil) {
          stop = { kind: 'paused' };
          break;
        }
        const r = data.rows[next]!;
        const writer = this.#writer(job, data.runId, token, r);
        const outcome = await this.#sendRow(job, data, r, writer, signal);
        if (outcome.kind === 'done')
          results.push({
            result: outcome.result,
            fence: outcome.settles ? { ...writer, settles: outcome.settles } : writer,
          });
        else if (outcome.kind === 'wait') waiting.push({ row: r, ms: outcome.ms });
        else if (outcome.kind === 'cancelled') {
          // The cancel landed while this job was running: none of its rows left is sent.
          cancelledRun = true;
          break;
        } else if (outcome.kind === 'retry') {
          // A job of one row retries through BullMQ's backoff; a row of a batch retries alone,
          // so one flaky row neither holds up nor spends the attempts of the others.
          if (data.rows.length === 1) throw outcome.err;
          flaky.push(r);
        } else if (outcome.kind !== 'recorded') {
          stop = outcome;
          break;
        }
      }
    } finally {
      // Stored even when the job is lost: the fence refuses what this attempt may no longer write.
      if (results.length > 0) await this.#store(job, data.runId, results);
    }
    if (cancelledRun) await this.#recordCancelled(job, data.runId, token, data.rows.slice(next));
    if (!stop) {
      if (flaky.length > 0) await this.#handOff(job, data.runId, flaky, { backoff: true });
      if (waiting.length > 0) await this.#defer(job, token, data, waiting);
      return;
    }
    if (stop.kind !== 'paused') await this.#applyPause(job, data.runId, stop);
    // Flaky and waiting rows stay with the job: its next start, after the pause, is their delay.
    const unsent = [...flaky, ...waiting.map((w) => w.row), ...data.rows.slice(next)];
    if (data.rows.length > 1 && job.attemptsStarted >= this.#maxStarts) {
      // The start cap is the job's, shared by its rows: the unsent ones go on with caps of their own.
      await this.#handOff(job, data.runId, unsent, { backoff: false });
      return;
    }
    // The job keeps only what it has not sent, so a later start (or an abort) never touches a
    // row that already has its result (a retried row may meanwhile belong to a newer job).
    if (unsent.length < data.rows.length) await job.updateData({ runId: data.runId, rows: unsent });
    throw new RateLimitError();
  }

  async #sendRow(
    job: SyncJob,
    data: RowBatchJobData,
    r: QueuedRow,
    writer: RowWriter,
    signal: AbortSignal | undefined,
  ): Promise<RowOutcome> {
    await this.#takeToken(job, signal);
    const sent = await this.#sender.send(writer, r, signal);
    switch (sent.kind) {
      case 'result':
        this.#countResult(job.name, sent.result.status, data.runId);
        if (sent.result.status === 'succeeded') this.#onSuccess();
        return { kind: 'done', result: sent.result, ...(sent.settles ? { settles: sent.settles } : {}) };
      case 'recorded':
        this.#countResult(job.name, sent.status, data.runId);
        if (sent.status === 'succeeded') this.#onSuccess();
        return { kind: 'recorded' };
      case 'has-result':
        return { kind: 'recorded' };
      case 'wait':
      case 'cancelled':
        return sent;
      case 'lost':
        throw new JobLostError(job.id, sent.reason);
      case 'error': {
        const verdict = await this.#judge(job, data.runId, sent.err, data.rows.length > 1);
        if (verdict.kind !== 'fail') return verdict;
        if (r.payload.op === 'deal.create' && sent.err instanceof TransientError && sent.err.maybeCommitted) {
          // Out of attempts, but the deal may exist: failing the row would hide it (and a retry
          // would look for it only then). The row's marker stays: after the settle time its next
          // start looks for the deal, and only a lookup that finds none sends it again.
          this.#logger.info(
            { runId: data.runId, row: r.row },
            'last attempt of a create lost its answer: the row looks for its deal after the settle time instead of failing',
          );
          return { kind: 'wait', ms: this.#options.createSettleMs ?? 30_000 };
        }
        this.#count(job.name, null, 'failed', 1, data.runId);
        return { kind: 'done', result: failureResult(placeOf(r), verdict.err, r.original) };
      }
    }
  }

  /** Stores a job's results; a refused one (a stale or late writer) is logged, never forced. */
  async #store(job: SyncJob, runId: string, results: FencedResult[]): Promise<void> {
    const refused = await this.#results.write(runId, results);
    if (refused.length > 0) {
      this.#logger.warn(
        {
          runId,
          jobId: job.id,
          rows: refused.map((r) => r.row).slice(0, 20),
          reasons: [...new Set(refused.map((r) => r.reason))],
        },
        'results not stored: this worker no longer owns these rows (their stored result stands)',
      );
    }
  }

  /**
   * Rows that must wait (another write to their record, or an identical create, is on the
   * wire; a create's settle time): a job of one row is delayed as it is, without spending an
   * attempt; rows of a batch continue as delayed jobs of their own.
   */
  async #defer(
    job: SyncJob,
    token: string,
    data: RowBatchJobData,
    waiting: Array<{ row: QueuedRow; ms: number }>,
  ): Promise<void> {
    if (data.rows.length === 1 && waiting.length === 1) {
      await job.moveToDelayed(Date.now() + waiting[0]!.ms, token);
      throw new DelayedError();
    }
    await this.queue.addBulk(
      waiting.map(({ row, ms }) => ({
        name: job.name,
        data: { runId: data.runId, rows: [row] },
        opts: {
          jobId: `${job.id ?? data.runId}-w${row.row}-${job.attemptsStarted}`,
          attempts: Math.max(1, (job.opts.attempts ?? 1) - job.attemptsMade),
          delay: ms,
        },
      })),
    );
  }

  async #processInvites(
    job: SyncJob,
    whole: InviteBatchJobData,
    token: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    // An invite is an email to a person: a batch redelivered after some of its addresses were
    // sent and recorded (a lost lock, a stalled job) sends only the rest.
    const rows = await this.#withoutResult(whole.runId, whole.rows);
    if (rows.length === 0) return;
    const data = rows.length === whole.rows.length ? whole : { ...whole, rows };
    const fences = data.rows.map((r) => this.#writer(job, data.runId, token, r));
    const fenced = (results: RowResult[]) => results.map((result, i) => ({ result, fence: fences[i]! }));
    // Invites carry no record id to order on: the fence here is the job's own lock.
    await this.#takeToken(job, signal);
    if (signal?.aborted || !(await this.#fence.holdsJob(fences[0]!)))
      throw new JobLostError(job.id, 'its lock is gone');
    try {
      await this.#options.client.addTeamMembers(
        { emails: data.rows.map((r) => r.email), ...data.options },
        signal ? { signal } : {},
      );
    } catch (err) {
      if (signal?.aborted) throw new JobLostError(job.id, String(signal.reason));
      const verdict = await this.#judge(job, data.runId, err, false);
      if (verdict.kind === 'retry') throw verdict.err;
      if (verdict.kind !== 'fail') {
        await this.#applyPause(job, data.runId, verdict);
        throw new RateLimitError();
      }
      if (verdict.err instanceof RejectedError && data.rows.length > 1) {
        // The API rejects a whole request for one bad address: bisect so every good one still goes in.
        await splitInviteBatch(this.queue, job, data);
        return;
      }
      this.#count(job.name, null, 'failed', data.rows.length, data.runId);
      await this.#store(
        job,
        data.runId,
        fenced(data.rows.map((r) => failureResult(placeOf(r), verdict.err, r.original))),
      );
      return;
    }
    this.#count(job.name, '2xx', 'succeeded', data.rows.length, data.runId);
    await this.#store(job, data.runId, fenced(data.rows.map((r) => succeeded(r, r.email))));
    this.#onSuccess();
  }

  /**
   * One place decides what each error class means for the job (docs/architecture.md, "Errors").
   * `sharedStarts`: the job holds several rows, so its start cap is not one row's to fail on.
   */
  async #judge(job: SyncJob, runId: string, err: unknown, sharedStarts: boolean): Promise<Verdict> {
    this.#count(
      job.name,
      err instanceof CrmError && err.status !== undefined ? String(err.status) : 'network',
      null,
      0,
      runId,
    );
    // Failures that are about where requests go, not what a row carries, hold the workspace.
    const breaker = await this.#breaker.judge(err);
    // On its last allowed start a job that is still being sent back gets its final result here,
    // so no row depends on BullMQ's own failure path (and an event that may be lost).
    const sentBack = breaker.kind === 'open' || err instanceof RateLimitedError || err instanceof AuthError;
    if (sentBack && !sharedStarts && job.attemptsStarted >= this.#maxStarts) {
      return {
        kind: 'fail',
        err: new CrmSyncError('CRM_RATE_LIMITED', `gave up after ${job.attemptsStarted} starts: ${errorMessage(err)}`),
      };
    }
    if (breaker.kind === 'open') return { kind: 'unreachable', reason: breaker.reason };
    if (err instanceof RateLimitedError) return { kind: 'rate-limited', err };
    if (err instanceof AuthError) return { kind: 'blocked', err };
    if (err instanceof TransientError) this.#outage.onFailure(errorMessage(err));
    const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    if (isPermanent(err) || lastAttempt) return { kind: 'fail', err };
    this.#logger.debug(
      { runId, jobId: job.id, attempt: job.attemptsMade + 1, err: errorMessage(err) },
      'transient failure, will retry',
    );
    this.#options.metrics?.inc(METRIC.retries, { workspace: this.#options.workspace, operation: job.name });
    return { kind: 'retry', err };
  }

  /**
   * A 429 pauses the workspace queue for Retry-After; a 401 pauses it and blocks its runs; an
   * open circuit breaker has already held it (the job only goes back).
   */
  async #applyPause(job: SyncJob, runId: string, verdict: PauseVerdict): Promise<void> {
    const log = this.#logger.child({ runId, jobId: job.id });
    if (verdict.kind === 'unreachable') {
      log.debug({ reason: verdict.reason }, 'job sent back: the workspace is held by the circuit breaker');
    } else if (verdict.kind === 'rate-limited') {
      this.#options.metrics?.inc(METRIC.rateLimited, { workspace: this.#options.workspace }, 1, runId);
      // Retry-After 0 or a past date must not turn into a tight requeue loop.
      const ms = Math.max(MIN_RATE_LIMIT_PAUSE_MS, verdict.err.retryAfterMs ?? 1000);
      this.#pausedUntil = Math.max(this.#pausedUntil, Date.now() + ms);
      // The queue holds back job starts; the bucket holds back the rows of jobs already running
      // (and cuts a learned rate).
      const [, rate] = await Promise.all([this.queue.rateLimit(ms), this.#bucket.pause(ms)]);
      log.debug({ ms, ...(this.#options.rateLimit ? {} : { learnedRate: rate }) }, '429: pausing the workspace queue');
    } else {
      await blockWorkspace({
        queue: this.queue,
        store: this.#options.store,
        workspace: this.#options.workspace,
        error: verdict.err,
      });
      log.error({ status: verdict.err.status }, 'the CRM refused the API key: workspace paused, runs blocked');
    }
  }

  /**
   * Rows of a batch continued as jobs of their own (ids derive from the batch, so a re-run of
   * the batch adds nothing new). `backoff`: they failed transiently and start after the first
   * retry delay, with the attempts the batch had left but one.
   */
  async #handOff(job: SyncJob, runId: string, rows: QueuedRow[], o: { backoff: boolean }): Promise<void> {
    const backoffMs = this.#options.retry?.backoffMs ?? 1000;
    const attempts = Math.max(1, (job.opts.attempts ?? 1) - job.attemptsMade - (o.backoff ? 1 : 0));
    await this.queue.addBulk(
      rows.map((r) => ({
        name: job.name,
        data: { runId, rows: [r] },
        opts: { jobId: `${job.id ?? runId}-s${r.row}`, attempts, ...(o.backoff ? { delay: jitter(backoffMs) } : {}) },
      })),
    );
  }

  /** A token from the workspace's shared bucket before each request (waits its turn). */
  async #takeToken(job: SyncJob, signal: AbortSignal | undefined): Promise<void> {
    try {
      await this.#bucket.take(signal);
    } catch (err) {
      if (signal?.aborted) throw new JobLostError(job.id, String(signal.reason));
      throw err;
    }
  }

  /**
   * `status`: the answer's HTTP status class/code, null when no request is counted; `rows`: final
   * results; `runId`: the run's own activity series gets them too (not a label of the counters).
   */
  #count(
    operation: string,
    status: string | null,
    row: 'succeeded' | 'failed' | null,
    rows: number,
    runId: string,
  ): void {
    const m = this.#options.metrics;
    if (!m) return;
    const workspace = this.#options.workspace;
    if (status !== null) m.inc(METRIC.requests, { workspace, operation, status }, 1, runId);
    if (row !== null && rows > 0) m.inc(METRIC.rows, { workspace, operation, status: row }, rows, runId);
  }

  /** BullMQ's errors: a lock lost as a job finished is said as such, not as a connection error. */
  #onWorkerError(err: Error): void {
    const message = errorMessage(err);
    // BullMQ's job fetch (a write) refused for room: the guard pauses this worker with one line,
    // instead of a warning per fetch in a tight loop (hundreds of thousands a minute).
    if (isRedisFull(err)) {
      this.#full.onError(err);
      return;
    }
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

  #jobDataGone = false;

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

  #countResult(operation: string, status: RowResult['status'], runId: string): void {
    if (status === 'succeeded') this.#count(operation, '2xx', 'succeeded', 1, runId);
    else if (status === 'failed') this.#count(operation, null, 'failed', 1, runId);
  }

  #onSuccess(): void {
    this.#outage.onSuccess();
    this.#breaker.onAnswer();
  }
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

/** Floor for a 429's pause: a Retry-After of 0 must not spin the job through its starts. */
const MIN_RATE_LIMIT_PAUSE_MS = 500;
