import { randomBytes } from 'node:crypto';
import { defineScript, flagReply, type RedisClient } from '../redis/index.js';
import { syncLockKey } from '../keys/index.js';

/** Removes the lock while it is still this holder's. */
const RELEASE = defineScript({ file: 'release-sync-lock-1', keys: ['lockKey'], args: ['token'], reply: flagReply });
/** Renews the lock while it is still this holder's: 1 renewed, 0 lost. */
const EXTEND = defineScript({
  file: 'extend-sync-lock-1',
  keys: ['lockKey'],
  args: ['token', 'ttlMs'],
  reply: flagReply,
});

/**
 * One holder per sync at a time, across scheduler processes. The lock expires on its own if
 * its holder dies (so a crashed scheduler never blocks a sync for good) and is renewed while
 * the holder runs. A holder that cannot renew in time has lost it — another scheduler may
 * already hold it — and must stop: `lost` says so, with `lostReason` in plain words.
 */
export class SyncLock {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #ttlMs: number;
  readonly #token = randomBytes(12).toString('hex');
  #timer: NodeJS.Timeout | undefined;
  #renewing = false;
  /** When the last successful SET/EXTEND was sent: the lock is ours until this + ttl at least. */
  #validSince = 0;
  #lostReason: string | undefined;

  constructor(redis: RedisClient, prefix: string, sync: string, ttlMs = 60_000) {
    this.#redis = redis;
    this.#key = syncLockKey(prefix, sync);
    this.#ttlMs = ttlMs;
  }

  get lost(): boolean {
    return this.#lostReason !== undefined;
  }

  get lostReason(): string | undefined {
    return this.#lostReason;
  }

  async acquire(): Promise<boolean> {
    const sent = Date.now();
    const ok = (await this.#redis.set(this.#key, this.#token, 'PX', this.#ttlMs, 'NX')) === 'OK';
    if (ok) {
      this.#validSince = sent;
      this.#timer = setInterval(() => void this.#renew(), Math.max(50, Math.floor(this.#ttlMs / 3)));
      this.#timer.unref();
    }
    return ok;
  }

  /** Asks Redis whether the lock is still ours (not just whether renewals have failed so far). */
  async held(): Promise<boolean> {
    if (this.lost) return false;
    return (await this.#redis.get(this.#key)) === this.#token;
  }

  async release(): Promise<void> {
    clearInterval(this.#timer);
    await RELEASE.run(this.#redis, { lockKey: this.#key }, { token: this.#token });
  }

  async #renew(): Promise<void> {
    // A slow Redis must not pile up renewals; the next tick tries again.
    if (this.#renewing || this.lost) return;
    this.#renewing = true;
    const sent = Date.now();
    try {
      const renewed = await EXTEND.run(this.#redis, { lockKey: this.#key }, { token: this.#token, ttlMs: this.#ttlMs });
      if (renewed) this.#validSince = sent;
      else this.#lose('the sync lock expired and was taken over or removed');
    } catch (err) {
      // Unanswered renewals are not a loss yet: the key lives until ttl after the last success.
      if (Date.now() - this.#validSince >= this.#ttlMs) {
        this.#lose(
          `the sync lock could not be renewed for ${this.#ttlMs} ms (${err instanceof Error ? err.message : String(err)})`,
        );
      }
    } finally {
      this.#renewing = false;
    }
  }

  #lose(reason: string): void {
    this.#lostReason = reason;
    clearInterval(this.#timer);
  }
}
