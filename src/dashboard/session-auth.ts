import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Secret } from '../config/index.js';

export interface SessionAuthOptions {
  /** The dashboard token; null runs the dashboard open (only with --insecure-no-auth). */
  token: Secret | null;
  /** How long a sign-in lasts. Default 12 hours. */
  sessionTtlMs?: number;
}

const DEFAULT_TTL_MS = 12 * 3600 * 1000;

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

function equal(a: string, b: string): boolean {
  // Hash first: timingSafeEqual needs equal lengths, and hashing hides the length too.
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * Signed sessions and form tokens. The cookie is `<sid>.<expiresMs>.<mac>`: it never holds the
 * token, only an HMAC keyed by it, so changing the token signs everyone out. Without a token
 * (insecure mode) a random per-process key still signs the form tokens, so cross-site forms
 * stay refused even on an open dashboard.
 */
export class SessionAuth {
  readonly insecure: boolean;
  readonly ttlMs: number;
  readonly #token: Secret | null;
  readonly #key: Buffer;

  constructor(options: SessionAuthOptions) {
    this.#token = options.token;
    this.insecure = options.token === null;
    this.ttlMs = options.sessionTtlMs ?? DEFAULT_TTL_MS;
    this.#key =
      options.token === null
        ? randomBytes(32)
        : createHmac('sha256', options.token.reveal()).update('crm-sync dashboard sessions v1').digest();
  }

  /** True when `candidate` is the dashboard token (constant time). */
  checkToken(candidate: string): boolean {
    if (this.#token === null) return true;
    return equal(candidate, this.#token.reveal());
  }

  newSession(now = Date.now()): { cookie: string; sid: string; maxAgeSeconds: number } {
    const sid = randomBytes(16).toString('base64url');
    const expires = now + this.ttlMs;
    return { cookie: `${sid}.${expires}.${this.#mac(`session:${sid}.${expires}`)}`, sid, maxAgeSeconds: Math.floor(this.ttlMs / 1000) };
  }

  /** The session id of a valid, unexpired cookie, else null. */
  verifySession(cookie: string | undefined, now = Date.now()): string | null {
    if (cookie === undefined) return null;
    const [sid, expires, mac, extra] = cookie.split('.');
    if (sid === undefined || expires === undefined || mac === undefined || extra !== undefined) return null;
    if (!equal(mac, this.#mac(`session:${sid}.${expires}`))) return null;
    const until = Number(expires);
    return Number.isFinite(until) && until > now ? sid : null;
  }

  /** The form token of a session: forms carry it, cross-site pages cannot know it. */
  csrfToken(sid: string): string {
    return this.#mac(`csrf:${sid}`);
  }

  checkCsrf(sid: string, candidate: unknown): boolean {
    return typeof candidate === 'string' && candidate !== '' && equal(candidate, this.csrfToken(sid));
  }

  #mac(data: string): string {
    return createHmac('sha256', this.#key).update(data).digest('base64url');
  }
}
