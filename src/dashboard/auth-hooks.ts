import { isIP } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { UPLOT_CSS_PATH, UPLOT_JS_PATH } from './assets.js';
import type { AuthThrottle } from './auth-throttle.js';
import type { SessionAuth } from './session-auth.js';
import type { SessionStore } from './session-store.js';

export const SESSION_COOKIE = 'crm_sync_session';

/** How a request got in: a script's bearer token, a browser session, or an open dashboard. */
export interface RequestAuth {
  kind: 'bearer' | 'session' | 'open';
  /** Session id forms are bound to ('' for bearer requests, which need no form token). */
  sid: string;
}

const auths = new WeakMap<FastifyRequest, RequestAuth>();

/**
 * Paths anyone may load: probes, the sign-in form and the stylesheet/script it uses, and the
 * chart library (public code, no data; static like the dashboard's own assets).
 */
const OPEN_PATHS = new Set([
  '/healthz',
  '/readyz',
  '/login',
  '/static/dashboard.css',
  '/static/dashboard.js',
  UPLOT_CSS_PATH,
  UPLOT_JS_PATH,
]);
/** Machine endpoints: no redirect to a form, a 401 instead. */
const API_PREFIXES = ['/metrics', '/queues/api/'];
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function authOf(request: FastifyRequest): RequestAuth {
  return auths.get(request) ?? { kind: 'open', sid: '' };
}

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** The dashboard's own origin as this request reached it (scheme from trustProxy when set). */
export function ownOrigin(request: FastifyRequest): string | null {
  try {
    return new URL(`${request.protocol}://${request.host}`).origin;
  } catch {
    return null;
  }
}

/**
 * A browser marks where a request comes from (`Sec-Fetch-Site`, `Origin`); another site's page
 * can neither remove nor fake these. A state-changing request without either is refused: every
 * browser that could carry our cookie sends at least one. `Origin` must equal ours in scheme,
 * host and port: an `http://` page of the same host is another origin.
 */
export function isSameOrigin(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  const origin = request.headers.origin;
  if (site === undefined && origin === undefined) return false;
  if (site !== undefined && site !== 'same-origin') return false;
  if (origin === undefined) return true;
  try {
    const own = ownOrigin(request);
    return own !== null && new URL(origin).origin === own;
  } catch {
    return false;
  }
}

/** `localhost`, `*.localhost`, 127.0.0.0/8 or ::1, with any port. */
export function isLoopbackHost(host: string | undefined): boolean {
  if (host === undefined || host === '') return false;
  let name: string;
  try {
    name = new URL(`http://${host}`).hostname.toLowerCase();
  } catch {
    return false;
  }
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (name === '[::1]') return true;
  return isIP(name) === 4 && name.startsWith('127.');
}

/** A socket peer in 127.0.0.0/8 or ::1, also written IPv4-mapped (`::ffff:127.0.0.1`, what a dual-stack socket reports). */
export function isLoopbackPeer(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.toLowerCase().startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  if (isIP(v4) === 4) return v4.startsWith('127.');
  return address === '::1';
}

export function refuse(
  reply: FastifyReply,
  status: 401 | 403 | 429,
  message: string,
  retryAfterSeconds?: number,
): FastifyReply {
  if (status === 401) reply.header('WWW-Authenticate', 'Bearer realm="crm-sync dashboard"');
  if (retryAfterSeconds !== undefined) reply.header('Retry-After', String(retryAfterSeconds));
  return reply.code(status).type('text/plain; charset=utf-8').send(`${message}\n`);
}

export function tooManyMessage(seconds: number): string {
  return `Too many wrong tokens from this address. Try again in ${seconds} s.`;
}

export interface AuthHookDeps {
  auth: SessionAuth;
  /** Null only in insecure mode. */
  sessions: SessionStore | null;
  throttle: AuthThrottle | null;
}

/** The session id of a signed cookie whose record still lives in Redis, else null. */
export async function sessionOf(request: FastifyRequest, sessions: SessionStore | null): Promise<string | null> {
  const raw = request.cookies[SESSION_COOKIE];
  if (sessions === null || raw === undefined || raw === '') return null;
  const unsigned = request.unsignCookie(raw);
  if (!unsigned.valid || unsigned.value === null) return null;
  return (await sessions.touch(unsigned.value)) ? unsigned.value : null;
}

const INSECURE_HOST_MESSAGE =
  'This dashboard runs without authentication (--insecure-no-auth) and answers only to a loopback host name (localhost, 127.0.0.1, [::1]).';
const INSECURE_PEER_MESSAGE =
  'This dashboard runs without authentication (--insecure-no-auth) and answers only to this machine (a loopback address).';

/**
 * Every request passes here first: find who is asking, refuse cross-site state changes, then
 * let open paths through and send everyone else without a valid token or session to sign in.
 */
export function registerAuthHook(app: FastifyInstance, deps: AuthHookDeps): void {
  const { auth, sessions, throttle } = deps;
  app.addHook('onRequest', async (request, reply) => {
    const path = pathOf(request.url);
    let who: RequestAuth | null = null;
    if (auth.insecure) {
      // No token: only this machine may talk to it, and a page another site loads (DNS
      // rebinding) names another host. No bearer exemption either: there is no token to prove.
      if (!isLoopbackHost(request.headers.host)) return refuse(reply, 403, INSECURE_HOST_MESSAGE);
      // The Host header is the client's word; the socket's peer is not. A dashboard bound to
      // another interface in code (the CLI refuses that) still serves nobody else.
      if (!isLoopbackPeer(request.socket.remoteAddress)) return refuse(reply, 403, INSECURE_PEER_MESSAGE);
      who = { kind: 'open', sid: 'local' };
    } else if (OPEN_PATHS.has(path) && path !== '/login') {
      return undefined; // probes and static files: no identity needed, no Redis call
    } else if (request.headers.authorization !== undefined) {
      // Counted before it is compared: see auth-throttle.ts.
      const attempt = await throttle?.attempt(request);
      if (attempt?.allowed === false)
        return refuse(reply, 429, tooManyMessage(attempt.waitSeconds), attempt.waitSeconds);
      const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization);
      if (m === null || !auth.checkToken(m[1] ?? '')) {
        await attempt?.failed();
        return refuse(reply, 401, 'Wrong dashboard token.');
      }
      await attempt?.succeeded();
      who = { kind: 'bearer', sid: '' };
    } else {
      const sid = await sessionOf(request, sessions);
      if (sid !== null) who = { kind: 'session', sid };
    }
    if (who !== null) auths.set(request, who);

    // Scripts with a bearer header are exempt: a browser cannot be made to send that header.
    if (!SAFE_METHODS.has(request.method) && who?.kind !== 'bearer' && !isSameOrigin(request)) {
      return refuse(
        reply,
        403,
        'Cross-site request refused: use the dashboard page itself, or send Authorization: Bearer <token>.',
      );
    }
    if (who !== null || OPEN_PATHS.has(path)) return undefined;
    if (request.method === 'GET' && !API_PREFIXES.some((p) => path.startsWith(p))) {
      return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 302);
    }
    return refuse(reply, 401, 'Sign in first: send Authorization: Bearer <token>, or sign in at /login.');
  });
}

export const FORM_TOKEN_MESSAGE =
  'This form has expired or did not come from the dashboard. Reload the page and try again.';

/** For form posts: the session's form token must come back in `_csrf` (bearer scripts skip it). */
export function checkFormToken(auth: SessionAuth, request: FastifyRequest, candidate: unknown): boolean {
  const who = authOf(request);
  return who.kind === 'bearer' || (who.sid !== '' && auth.checkCsrf(who.sid, candidate));
}

/** preHandler for urlencoded form posts. */
export function formTokenGuard(auth: SessionAuth) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    if (checkFormToken(auth, request, body._csrf)) return undefined;
    return refuse(reply, 403, FORM_TOKEN_MESSAGE);
  };
}

/** The form token to put in the pages this request renders. */
export function formTokenFor(auth: SessionAuth, request: FastifyRequest): string {
  const who = authOf(request);
  return auth.csrfToken(who.sid === '' ? 'bearer' : who.sid);
}
