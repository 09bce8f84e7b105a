import { setTimeout as sleep } from 'node:timers/promises';
import type { Worker } from 'bullmq';
import type { RedisClient } from '../redis/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { isRedisFull } from '../redis/index.js';
import { type SyncJobData, type SyncJobName } from '../queue/index.js';

export interface RedisFullGuardOptions {
  worker: Worker<SyncJobData, unknown, SyncJobName>;
  redis: RedisClient;
  /** A key of this deployment's prefix the probe may write (it expires at once). */
  probeKey: string;
  logger: Logger;
  /** How often a paused worker tries a write (ms). */
  probeMs: number;
}

/**
 * Redis full (maxmemory, noeviction) is a stop, not a storm: no row can be sent while it is
 * (the write fence must write before every send), so instead of cycling jobs through failures
 * the worker stops taking jobs, says why once, and takes them again when a probe write passes.
 */
export class RedisFullGuard {
  readonly #o: RedisFullGuardOptions;
  #paused = false;

  constructor(options: RedisFullGuardOptions) {
    this.#o = options;
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** Called with a job's error; pauses the worker (locally) when Redis refused a write for room. */
  onError(err: unknown): void {
    if (this.#paused || !isRedisFull(err)) return;
    this.#paused = true;
    this.#o.logger.error(
      { err: errorMessage(err) },
      'Redis is full (maxmemory reached): this worker stops taking jobs until Redis has room; no row is sent meanwhile. Free memory or raise maxmemory',
    );
    this.#o.worker.pause(true).catch(() => undefined);
    void this.#probe();
  }

  async #probe(): Promise<void> {
    const started = Date.now();
    while (this.#paused && !this.#o.worker.closing) {
      await sleep(this.#o.probeMs);
      try {
        await this.#o.redis.set(this.#o.probeKey, '1', 'PX', 1000);
        this.#paused = false;
        await this.#o.worker.resume();
        this.#o.logger.info(
          { seconds: Math.round((Date.now() - started) / 1000) },
          'Redis has room again: taking jobs',
        );
      } catch {
        // Still full (or away): look again later.
      }
    }
  }
}
