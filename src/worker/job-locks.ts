import type { Logger } from '../log/index.js';
import type { SyncJobWorker } from './sync-job.js';

export interface JobLockWatchOptions {
  /** BullMQ's lock duration of the worker (ms). */
  lockDurationMs: number;
  logger: Logger;
}

/**
 * Cancels a job's in-flight work the moment this process can no longer be sure it holds the
 * job's lock (docs/architecture.md, "Fencing"). BullMQ says so itself when a renewal is refused
 * (`lockRenewalFailed`), but not when the renewal never comes back (Redis blackholed: the
 * command hangs): so every job also has a local deadline, its last confirmed renewal plus
 * most of the lock duration, after which it is cancelled too. Cancelling aborts the job's
 * signal, which aborts its CRM request; the write fence in Redis is what finally refuses a
 * stale worker, this only stops it early and says so.
 */
export class JobLockWatch {
  readonly #held = new Map<string, number>();
  readonly #lost = new Set<string>();
  readonly #timer: NodeJS.Timeout;
  readonly #worker: SyncJobWorker;
  readonly #o: JobLockWatchOptions;

  constructor(worker: SyncJobWorker, options: JobLockWatchOptions) {
    this.#worker = worker;
    this.#o = options;
    worker.on('lockRenewalFailed', (ids: string[]) => {
      for (const id of ids) this.#lose(id, 'its lock could not be renewed (another worker may own it now)');
    });
    worker.on('locksRenewed', ({ jobIds }: { jobIds: string[] }) => {
      const now = Date.now();
      for (const id of jobIds) if (this.#held.has(id)) this.#held.set(id, now);
    });
    // A renewal is confirmed after Redis set it, so keep a fifth of the duration in hand.
    const budget = options.lockDurationMs * 0.8;
    this.#timer = setInterval(
      () => {
        const now = Date.now();
        for (const [id, renewedAt] of this.#held) {
          if (now - renewedAt > budget)
            this.#lose(
              id,
              `no lock renewal confirmed for ${Math.round((now - renewedAt) / 1000)} s (Redis unreachable?)`,
            );
        }
      },
      Math.max(250, Math.floor(options.lockDurationMs / 10)),
    );
    this.#timer.unref();
  }

  /** The processor took the job: its lock was just set. */
  track(jobId: string): void {
    this.#held.set(jobId, Date.now());
    this.#lost.delete(jobId);
  }

  untrack(jobId: string): void {
    this.#held.delete(jobId);
    this.#lost.delete(jobId);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #lose(jobId: string, why: string): void {
    if (!this.#held.has(jobId) || this.#lost.has(jobId)) return;
    this.#lost.add(jobId);
    this.#o.logger.warn(
      { jobId, why },
      'lost the lock of a job: its request in flight is aborted and its unsent rows are left to the worker that takes the job over',
    );
    this.#worker.cancelJob(jobId, `lock lost: ${why}`);
  }
}
