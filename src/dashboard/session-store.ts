import { createHash, randomBytes } from 'node:crypto';
import { defineScript, flagReply, scanKeys, unlinkKeys, type RedisClient } from '../redis/index.js';
import { sessionKey, sessionKeyBase } from '../keys/index.js';

export interface SessionStoreOptions {
  redis: RedisClient;
  /** The deployment's key prefix (config.prefix). */
  prefix: string;
  /** The token's fingerprint (SessionAuth.fingerprint): sessions of another token never verify. */
  fingerprint: string;
  /** Absolute lifetime of a sign-in. */
  ttlMs: number;
  /** A session unused this long ends (idle timeout). */
  idleMs: number;
}

/**
 * Verify and slide in one step: the record holds its absolute end (epoch ms); a live session's
 * key lives the idle time more, never past that end.
 */
const TOUCH = defineScript({
  file: 'touch-session-1',
  keys: ['sessionKey'],
  args: ['now', 'idleMs'],
  reply: flagReply,
});

/**
 * Server-side sign-ins (OWASP session management): the browser's cookie carries only a random
 * 256-bit id (signed); Redis holds the record under a hash of it, so one process's sign-out or a
 * token change ends the session for every dashboard process.
 *
 *   <p>:dashboard:session:<token fingerprint>:<sha256(id)>   string  absolute end (epoch ms);
 *                                                             TTL = idle time, capped at the end
 */
export class SessionStore {
  readonly #o: SessionStoreOptions;

  constructor(options: SessionStoreOptions) {
    this.#o = options;
  }

  #key(sid: string, fingerprint = this.#o.fingerprint): string {
    return sessionKey(this.#o.prefix, fingerprint, createHash('sha256').update(sid).digest('hex'));
  }

  /** A new session id, stored; never reuses an id the browser brought (no fixation). */
  async create(now = Date.now()): Promise<string> {
    const sid = randomBytes(32).toString('base64url');
    await this.#o.redis.set(this.#key(sid), String(now + this.#o.ttlMs), 'PX', Math.min(this.#o.idleMs, this.#o.ttlMs));
    return sid;
  }

  /** True while the session lives; each use extends it by the idle time (up to its end). */
  async touch(sid: string, now = Date.now()): Promise<boolean> {
    return TOUCH.run(this.#o.redis, { sessionKey: this.#key(sid) }, { now, idleMs: this.#o.idleMs });
  }

  async revoke(sid: string): Promise<void> {
    await this.#o.redis.del(this.#key(sid));
  }

  /**
   * Removes the sessions of every other token (a changed token signs everyone out, also in
   * Redis, not only by failing the cookie signature). SCAN, never KEYS.
   */
  async revokeOtherTokens(): Promise<number> {
    const base = sessionKeyBase(this.#o.prefix);
    const mine = `${base}${this.#o.fingerprint}:`;
    let removed = 0;
    await scanKeys(this.#o.redis, `${base}*`, async (keys) => {
      removed += await unlinkKeys(
        this.#o.redis,
        keys.filter((k) => !k.startsWith(mine)),
      );
    });
    return removed;
  }
}
