import type { Logger } from '../log/index.js';
import { blockWorkspace, type WorkspaceQueue } from '../queue/index.js';
import { type SharedTokenBucket } from '../rate/index.js';
import type { RunStore } from '../runs/index.js';
import type { PauseVerdict } from './answer-decision.js';
import type { SyncJob } from './sync-job.js';
import type { WorkerMetrics } from './worker-metrics.js';

export interface WorkspacePauseOptions {
  workspace: string;
  queue: WorkspaceQueue;
  store: RunStore;
  bucket: SharedTokenBucket;
  metrics: WorkerMetrics;
  logger: Logger;
  /** The bucket's rate is learned from 429s (no known limit): a pause's log line says the rate. */
  learnsRate: boolean;
}

/**
 * A 429 pauses the workspace queue for Retry-After; a 401 pauses it and blocks its runs; an
 * open circuit breaker has already held it (the job only goes back).
 */
export class WorkspacePause {
  /** Until when this process knows the workspace is paused by a 429 (epoch ms). */
  #until = 0;

  constructor(private readonly o: WorkspacePauseOptions) {}

  /** Another job's 429 paused the workspace: a running job stops rather than run into it too. */
  get inForce(): boolean {
    return Date.now() < this.#until;
  }

  async apply(job: SyncJob, runId: string, verdict: PauseVerdict): Promise<void> {
    const log = this.o.logger.child({ runId, jobId: job.id });
    if (verdict.kind === 'unreachable') {
      log.debug({ reason: verdict.reason }, 'job sent back: the workspace is held by the circuit breaker');
    } else if (verdict.kind === 'rate-limited') {
      this.o.metrics.rateLimited(runId);
      const ms = verdict.pauseMs;
      this.#until = Math.max(this.#until, Date.now() + ms);
      // The queue holds back job starts; the bucket holds back the rows of jobs already running
      // (and cuts a learned rate).
      const [, rate] = await Promise.all([this.o.queue.rateLimit(ms), this.o.bucket.pause(ms)]);
      log.debug({ ms, ...(this.o.learnsRate ? { learnedRate: rate } : {}) }, '429: pausing the workspace queue');
    } else {
      const { queue, store, workspace } = this.o;
      // A refusal of a request sent before the block was last lifted (`runs resume` while it was
      // in flight) says nothing of the key now: the job only goes back, and its rows are sent
      // again with the key as it is. A key still refused is refused again, and blocks then.
      const { sentAt } = verdict;
      const lifted = sentAt !== undefined ? await store.liftedAt(workspace, 'blocked') : undefined;
      if (sentAt !== undefined && lifted !== undefined && sentAt < lifted) {
        log.info(
          { status: verdict.err.status },
          'a 401 to a request sent before the block was lifted: the job goes back, the workspace stays unblocked',
        );
        return;
      }
      await blockWorkspace({ queue, store, workspace, error: verdict.err });
      log.error({ status: verdict.err.status }, 'the CRM refused the API key: workspace paused, runs blocked');
    }
  }
}
