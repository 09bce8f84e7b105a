import { setTimeout as sleep } from 'node:timers/promises';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import type { RedisClient } from './redis-client.js';
import { isRedisFull } from './ride-out-redis.js';

/** What the guard uses of a BullMQ Worker: pausing, resuming, and whether it is closing. */
export interface PausableWorker {
  pause(doNotWaitActive?: boolean): Promise<void>;
  resume(): Promise<void>;
  readonly closing: Promise<void> | undefined;
}

export interface RedisFullGuardOptions {
  worker: PausableWorker;
  redis: RedisClient;
  /** A key of this deployment's prefix the probe may write (it expires at once). */
  probeKey: string;
  logger: Logger;
  /** How often a paused worker tries a write (ms). */
  probeMs: number;
  /** What stops while Redis is full, for the one line: e.g. "this worker stops taking jobs". */
  stops: string;
  /** What starts again once it has room, for the line that says so: e.g. "taking jobs". */
  resumes: string;
}

/**
 * Redis full (maxmemory, noeviction) is a stop, not a storm: BullMQ's job fetch is a write, and
 * refused it reports the refusal as an 'error' in a tight loop (hundreds of thousands of lines a
 * minute). Instead the worker (a sync worker: no row can be sent while Redis is full, since the
 * write fence must write before every send; the scheduler: no tick can start) stops taking jobs,
 * says why once, and takes them again when a probe write passes.
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

  /**
   * Called with a BullMQ error; pauses the worker (locally) when Redis refused a write for room.
   * Returns whether the error was that (said already, or now): the caller logs the others.
   */
  onError(err: unknown): boolean {
    if (!isRedisFull(err)) return false;
    if (this.#paused) return true;
    this.#paused = true;
    this.#o.logger.error(
      { err: errorMessage(err) },
      `Redis is full (maxmemory reached): ${this.#o.stops} until Redis has room; no row is sent meanwhile. Free memory or raise maxmemory`,
    );
    this.#o.worker.pause(true).catch(() => undefined);
    void this.#probe();
    return true;
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
          `Redis has room again: ${this.#o.resumes}`,
        );
      } catch {
        // Still full (or away): look again later.
      }
    }
  }
}
