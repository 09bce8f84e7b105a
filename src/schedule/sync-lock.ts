import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const EXTEND = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;

/**
 * One holder per sync at a time, across scheduler processes. The lock expires on its own if
 * its holder dies (so a crashed scheduler never blocks a sync for good) and is kept alive
 * while the holder runs.
 */
export class SyncLock {
  readonly #redis: Redis;
  readonly #key: string;
  readonly #ttlMs: number;
  readonly #token = randomBytes(12).toString('hex');
  #timer: NodeJS.Timeout | undefined;

  constructor(redis: Redis, prefix: string, sync: string, ttlMs = 60_000) {
    this.#redis = redis;
    this.#key = `${prefix}:sync:${sync}:lock`;
    this.#ttlMs = ttlMs;
  }

  async acquire(): Promise<boolean> {
    const ok = (await this.#redis.set(this.#key, this.#token, 'PX', this.#ttlMs, 'NX')) === 'OK';
    if (ok) {
      this.#timer = setInterval(() => {
        void this.#redis.eval(EXTEND, 1, this.#key, this.#token, this.#ttlMs).catch(() => undefined);
      }, Math.max(50, Math.floor(this.#ttlMs / 3)));
      this.#timer.unref();
    }
    return ok;
  }

  async release(): Promise<void> {
    clearInterval(this.#timer);
    await this.#redis.eval(RELEASE, 1, this.#key, this.#token);
  }
}
