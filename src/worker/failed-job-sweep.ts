import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import {
  isInviteBatch,
  roundOf,
  toJobData,
  type InviteRow,
  type QueuedRow,
  type WorkspaceQueue,
} from '../queue/index.js';
import { failed, type RowFence, type RunStore } from '../runs/index.js';
import type { FencedResult } from './result-writer.js';
import type { SyncJob } from './sync-job.js';

export interface FailedJobSweepOptions {
  workspace: string;
  queue: WorkspaceQueue;
  store: RunStore;
  fence: RowFence;
  /** Stores results through the worker's fenced writer (it logs refusals). */
  write: (job: SyncJob, runId: string, results: FencedResult[]) => Promise<void>;
  logger: Logger;
  /** How often the failed jobs and silent producers are looked at (ms). */
  intervalMs: number;
  /** A run whose producer was silent this long is failed (ms). */
  producerSilenceMs: number;
}

/**
 * What no single event can be trusted with: jobs BullMQ failed by itself (stalled too often,
 * start cap) never reached the processor's result step, the `failed` event is lost if the
 * process dies at that moment, and a producer killed mid-file leaves its run running.
 */
export class FailedJobSweep {
  readonly #o: FailedJobSweepOptions;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** The sweep under way, if any: the close waits for it rather than pull its connection away. */
  #running: Promise<void> | undefined;

  constructor(options: FailedJobSweepOptions) {
    this.#o = options;
  }

  start(): void {
    this.#timer = setInterval(() => void this.#sweepOnce(), this.#o.intervalMs);
    this.#timer.unref();
    void this.#sweepOnce();
  }

  /** No sweep after this; resolves when the one under way (if any) has ended. */
  stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    return this.#running ?? Promise.resolve();
  }

  /** One sweep at a time: a slow Redis must not stack them up. */
  #sweepOnce(): Promise<void> {
    if (this.#stopped || this.#running) return this.#running ?? Promise.resolve();
    const running = this.#sweep().finally(() => (this.#running = undefined));
    this.#running = running;
    return running;
  }

  async #sweep(): Promise<void> {
    try {
      for (const job of await this.#o.queue.getFailed(0, 199)) await this.record(job, job.failedReason || 'failed');
      const silence = this.#o.producerSilenceMs;
      for (const id of await this.#o.store.failSilentProducers(this.#o.workspace, silence)) {
        this.#o.logger.warn({ runId: id }, "the process reading this run's file stopped mid-file: run failed");
      }
    } catch (e) {
      // Cut short by the close: the next sweep (of any worker of the workspace) does it again.
      if (this.#stopped) this.#o.logger.debug({ err: errorMessage(e) }, 'failed-job sweep cut short by the close');
      else this.#o.logger.warn({ err: errorMessage(e) }, 'could not sweep failed jobs');
    }
  }

  /**
   * Gives each row of a job BullMQ failed a failed result, unless it has one, or the row moved
   * to a newer retry round (the fence refuses this job's write), or its create may have been
   * applied (then a job of its own, with fresh attempts, looks for the deal instead).
   */
  async record(job: SyncJob, reason: string): Promise<void> {
    try {
      if ((await job.getState()) !== 'failed') return;
      const data = toJobData(job.data);
      const recorded = new Set(
        (
          await this.#o.store.getResults(
            data.runId,
            data.rows.map((r) => r.row),
          )
        ).map((r) => r.row),
      );
      let missing: Array<QueuedRow | InviteRow> = data.rows.filter((r) => !recorded.has(r.row));
      if (missing.length === 0) return;
      if (!isInviteBatch(data)) {
        const inDoubt = await this.#o.fence.createsInDoubt(
          data.runId,
          missing.map((r) => r.row),
        );
        const resolve = data.rows.filter((r) => inDoubt.has(r.row));
        if (resolve.length > 0) {
          await this.#o.queue.addBulk(
            resolve.map((r) => ({
              name: job.name,
              data: { runId: data.runId, rows: [r] },
              opts: { jobId: `${job.id ?? data.runId}-v${r.row}` },
            })),
          );
          missing = missing.filter((r) => !inDoubt.has(r.row));
        }
      }
      const message = `gave up: ${reason}`;
      // No lock (the job is failed), but the row's round: a row `runs retry` took over meanwhile is not this job's.
      await this.#o.write(
        job,
        data.runId,
        missing.map((r) => ({
          result: failed(r, { code: 'CRM_TRANSIENT', message }, r.original),
          fence: { lockKey: '', token: '', round: roundOf(r) },
        })),
      );
    } catch (e) {
      this.#o.logger.error({ jobId: job.id, err: errorMessage(e) }, 'could not record a failed job');
    }
  }
}
