import type { CrmClient } from '../crm/index.js';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import type { SharedTokenBucket, TokenWait } from '../rate/index.js';
import { roundOf, type SyncJobData, type WorkspaceQueue } from '../queue/index.js';
import { cancelled, failed, type RowFence, type RowResult, type RowWriter, type RunStore } from '../runs/index.js';
import { EVICTION_TAG, isEvictionReason } from '../redis/index.js';
import { judgeError, requestStatus, type Verdict } from './answer-decision.js';
import type { CircuitBreaker } from './circuit-breaker.js';
import type { CrmOutageWatch } from './crm-outage-watch.js';
import { jobAttempts, type SyncJob } from './sync-job.js';
import { PacedPost } from './paced-post.js';
import { ResultWriter, type FencedResult } from './result-writer.js';
import type { HistorySink } from './sync-worker-options.js';
import type { RowSender } from './row-sender.js';
import type { WorkerMetrics } from './worker-metrics.js';
import type { WorkspacePause } from './workspace-pause.js';

/** The job is no longer this worker's (its lock is gone): nothing more is sent or stored. */
export class JobLostError extends CrmSyncError {
  constructor(jobId: string | undefined, reason: string) {
    super(
      'JOB_LOST',
      `job ${jobId ?? '?'} is no longer this worker's (${reason}); its new owner sends the unsent rows`,
    );
  }
}

/** A workspace worker's parts, resolved: what row jobs and invite jobs share. */
export interface WorkerCoreParts {
  workspace: string;
  client: CrmClient;
  store: RunStore;
  fence: RowFence;
  queue: WorkspaceQueue;
  sender: RowSender;
  /** The workspace's shared request budget (a known limit, or a learned rate). */
  bucket: SharedTokenBucket;
  breaker: CircuitBreaker;
  outage: CrmOutageWatch;
  pause: WorkspacePause;
  metrics: WorkerMetrics;
  logger: Logger;
  /** BullMQ's key prefix of the workspace queue's jobs (a job's lock is `<prefix><id>:lock`). */
  lockPrefix: string;
  maxStarts: number;
  settleMs: number;
  backoffMs: number;
  /** Where stored results' field changes also go (the PostgreSQL history). Default none. */
  history?: HistorySink;
}

/**
 * What every job of the workspace goes through: the write fence's view of its attempt, the
 * shared request budget, the fenced result store, and the verdict on a failed request.
 */
export class WorkerCore {
  readonly #results: ResultWriter;
  /** Runs found gone from Redis, said once each. */
  readonly #goneSaid = new Set<string>();

  constructor(readonly parts: WorkerCoreParts) {
    this.#results = new ResultWriter(parts.store);
  }

  /** The write fence's view of this job attempt sending row `r`. */
  writer(job: SyncJob, runId: string, token: string, r: { row: number; round?: number; orderAs?: string }): RowWriter {
    const lockKey = `${this.parts.lockPrefix}${job.id ?? ''}:lock`;
    const w: RowWriter = { runId, row: r.row, round: roundOf(r), lockKey, token };
    if (r.orderAs) w.orderAs = r.orderAs;
    if (job.attemptsStarted > 1) w.resent = true;
    return w;
  }

  /** The rows of `rows` that have no stored result yet (one HMGET). */
  async withoutResult<R extends { row: number }>(runId: string, rows: R[]): Promise<R[]> {
    const stored = await this.parts.store.getResults(
      runId,
      rows.map((r) => r.row),
    );
    const done = new Set(stored.map((r) => r.row));
    return rows.filter((r) => !done.has(r.row));
  }

  /** Stores a job's results; a refused one (a stale or late writer) is logged, never forced. */
  async store(job: SyncJob, runId: string, results: FencedResult[]): Promise<void> {
    const refused = await this.#results.write(runId, results);
    const no = new Set(refused.map((r) => r.row));
    this.toHistory(
      runId,
      results.filter((r) => !no.has(r.result.row)).map((r) => r.result),
    );
    if (refused.length === 0) return;
    this.parts.logger.warn(
      {
        runId,
        jobId: job.id,
        rows: refused.map((r) => r.row).slice(0, 20),
        reasons: [...new Set(refused.map((r) => r.reason))],
      },
      'results not stored: this worker no longer owns these rows (their stored result stands)',
    );
  }

  /**
   * Stored results' field changes to the history sink, when there is one (never blocks or fails
   * a row). Results the fence stored in its own step (a create's) come here directly.
   */
  toHistory(runId: string, results: readonly RowResult[]): void {
    this.parts.history?.add(this.parts.workspace, runId, results);
  }

  /**
   * Records `rows` of a run that stopped sending (but those that already have a result):
   * `cancelled` for a cancelled run; `failed` (REDIS_EVICTS, "not sent") for a run failed because
   * Redis evicted keys. A run whose record is gone can store no result: its rows are dropped,
   * said once per worker. Answers whether the run stopped (false: it sends again, e.g. retried).
   */
  async recordStopped(job: SyncJob, runId: string, token: string, rows: SyncJobData['rows']): Promise<boolean> {
    const { store, workspace, logger } = this.parts;
    const run = await store.statusOf({ id: runId, workspace });
    if (run === null) {
      if (!this.#goneSaid.has(runId)) {
        this.#goneSaid.add(runId);
        logger.error(
          { runId, jobId: job.id },
          `run ${runId} is gone from Redis (evicted or flushed: ${EVICTION_TAG}?): its queued rows are not sent, since no result could be stored for them`,
        );
      }
      return true;
    }
    const evicted = run.status === 'failed' && isEvictionReason(run.reason ?? undefined);
    if (run.status !== 'cancelled' && !evicted) return false;
    // Rows an earlier start of the job sent keep their result (and need no refusal logged).
    const unsent = await this.withoutResult<SyncJobData['rows'][number]>(runId, rows);
    if (unsent.length === 0) return true;
    const results = unsent.map((r) => ({
      result: evicted
        ? failed(
            r,
            {
              code: 'REDIS_EVICTS',
              message:
                'not sent: the run was failed because Redis evicted keys while it was under way [REDIS_EVICTS]; its way on is in the run reason',
            },
            r.original,
          )
        : cancelled(r, run.reason ?? 'the run was cancelled', r.original),
      fence: this.writer(job, runId, token, r),
    }));
    await this.store(job, runId, results);
    return true;
  }

  /**
   * A token from the workspace's shared bucket before a create's or an invite's request (waits
   * its turn), carried to its POST (PacedPost): told when the request left, given back when none
   * was sent on it after all, renewed when held through a lookup. The POST goes a fence call or
   * more after its token, a round trip that is tens of ms where Redis is far.
   */
  async pacedPost(job: SyncJob, signal: AbortSignal | undefined): Promise<PacedPost> {
    const take = async (): Promise<TokenWait> => {
      try {
        const wait = this.parts.bucket.reserve(signal);
        await wait.granted;
        return wait;
      } catch (err) {
        if (signal?.aborted) throw new JobLostError(job.id, String(signal.reason));
        throw err;
      }
    };
    return new PacedPost(await take(), take);
  }

  /**
   * The verdict on a failed request, and what it tells the counters and watches. The circuit
   * breaker is asked first: failures about where requests go, not what a row carries, hold
   * the workspace. `sharedStarts`: the job holds several rows. `sentAt`: when the failed
   * request's row started on its way (a 401's verdict carries it: WorkspacePause).
   */
  async judge(job: SyncJob, runId: string, err: unknown, sharedStarts: boolean, sentAt?: number): Promise<Verdict> {
    const { metrics, logger } = this.parts;
    metrics.request(job.name, requestStatus(err), runId);
    const breaker = await this.parts.breaker.judge(err);
    const facts = {
      attemptsStarted: job.attemptsStarted,
      maxStarts: this.parts.maxStarts,
      attemptsMade: job.attemptsMade,
      attempts: jobAttempts(job),
      sharedStarts,
    };
    const judged = judgeError(err, breaker, facts);
    const { outage } = judged;
    const verdict: Verdict =
      judged.verdict.kind === 'blocked' && sentAt !== undefined ? { ...judged.verdict, sentAt } : judged.verdict;
    if (outage) this.parts.outage.onFailure(errorMessage(err));
    if (verdict.kind === 'retry') {
      const attempt = job.attemptsMade + 1;
      logger.debug({ runId, jobId: job.id, attempt, err: errorMessage(err) }, 'transient failure, will retry');
      metrics.retry(job.name);
    }
    return verdict;
  }

  /** An answer from the CRM: it is up. */
  onSuccess(): void {
    this.parts.outage.onSuccess();
    this.parts.breaker.onAnswer();
  }
}
