import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Secret } from '../config/index.js';

// The strength rule lives with the configuration (the token is checked where it is read); these
// names stay importable from here for the dashboard's callers.
export { checkTokenStrength, MIN_TOKEN_LENGTH, MAKE_TOKEN_HINT } from '../config/index.js';

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

function equal(a: string, b: string): boolean {
  // Hash first: timingSafeEqual needs equal lengths, and hashing hides the length too.
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * The dashboard's keys, all derived from its token: the cookie-signing secret, the form-token
 * key and the token's fingerprint (which names the session records of this token in Redis).
 * A new token therefore invalidates every cookie, form token and stored session at once.
 * Without a token (insecure mode) a random per-process key still signs the form tokens, so
 * cross-site forms stay refused even on an open dashboard.
 */
export class SessionAuth {
  readonly insecure: boolean;
  /** Secret @fastify/cookie signs the session cookie with. */
  readonly cookieSecret: string;
  /** Names this token's sessions in Redis (not the token, not reversible to it). */
  readonly fingerprint: string;
  readonly #token: Secret | null;
  readonly #key: Buffer;

  constructor(token: Secret | null) {
    this.#token = token;
    this.insecure = token === null;
    const derive = (purpose: string) =>
      token === null
        ? randomBytes(32)
        : createHmac('sha256', token.reveal()).update(`crm-sync dashboard ${purpose} v2`).digest();
    this.#key = derive('form tokens');
    this.cookieSecret = derive('session cookies').toString('base64url');
    this.fingerprint = derive('token fingerprint').toString('hex').slice(0, 16);
  }

  /** True when `candidate` is the dashboard token (constant time). */
  checkToken(candidate: string): boolean {
    if (this.#token === null) return true;
    return equal(candidate, this.#token.reveal());
  }

  /** The form token of a session: forms carry it, cross-site pages cannot know it. */
  csrfToken(sid: string): string {
    return createHmac('sha256', this.#key).update(`csrf:${sid}`).digest('base64url');
  }

  checkCsrf(sid: string, candidate: unknown): boolean {
    return typeof candidate === 'string' && candidate !== '' && equal(candidate, this.csrfToken(sid));
  }
}
