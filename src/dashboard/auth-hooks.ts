import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SessionAuth } from './session-auth.js';

export const SESSION_COOKIE = 'crm_sync_session';

/** How a request got in: a script's bearer token, a browser session, or an open dashboard. */
export interface RequestAuth {
  kind: 'bearer' | 'session' | 'open';
  /** Session id forms are bound to ('' for bearer requests, which need no form token). */
  sid: string;
}

const auths = new WeakMap<FastifyRequest, RequestAuth>();

/** Paths anyone may load: probes, the sign-in form and the stylesheet/script it uses. */
const OPEN_PATHS = new Set(['/healthz', '/readyz', '/login', '/static/dashboard.css', '/static/dashboard.js']);
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

/**
 * A browser marks where a request comes from (`Sec-Fetch-Site`, `Origin`); another site's page
 * can neither remove nor fake these. A state-changing request without either is refused: every
 * browser that could carry our cookie sends at least one.
 */
export function isSameOrigin(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  const origin = request.headers.origin;
  if (site === undefined && origin === undefined) return false;
  if (site !== undefined && site !== 'same-origin') return false;
  if (origin !== undefined) {
    try {
      const from = new URL(origin);
      // Parse our own Host with the origin's scheme so default ports compare equal (`host:80`).
      return from.host === new URL(`${from.protocol}//${request.host}`).host;
    } catch {
      return false;
    }
  }
  return true;
}

export function refuse(reply: FastifyReply, status: 401 | 403, message: string): FastifyReply {
  if (status === 401) reply.header('WWW-Authenticate', 'Bearer realm="crm-sync dashboard"');
  return reply.code(status).type('text/plain; charset=utf-8').send(`${message}\n`);
}

/**
 * Every request passes here first: find who is asking, refuse cross-site state changes, then
 * let open paths through and send everyone else without a valid token or session to sign in.
 */
export function registerAuthHook(app: FastifyInstance, auth: SessionAuth): void {
  app.addHook('onRequest', async (request, reply) => {
    const path = pathOf(request.url);
    const header = request.headers.authorization;
    let who: RequestAuth | null = null;
    if (auth.insecure) {
      // Open dashboard: a script that sends a bearer header still gets the script exemption.
      who = header !== undefined ? { kind: 'bearer', sid: '' } : { kind: 'open', sid: 'local' };
    } else if (header !== undefined) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (m === null || !auth.checkToken(m[1] ?? '')) return refuse(reply, 401, 'Wrong dashboard token.');
      who = { kind: 'bearer', sid: '' };
    } else {
      const sid = auth.verifySession(request.cookies[SESSION_COOKIE]);
      if (sid !== null) who = { kind: 'session', sid };
    }
    if (who !== null) auths.set(request, who);

    // Scripts with a bearer header are exempt: a browser cannot be made to send that header.
    if (!SAFE_METHODS.has(request.method) && who?.kind !== 'bearer' && !isSameOrigin(request)) {
      return refuse(reply, 403, 'Cross-site request refused: use the dashboard page itself, or send Authorization: Bearer <token>.');
    }
    if (who !== null || OPEN_PATHS.has(path)) return;
    if (request.method === 'GET' && !API_PREFIXES.some((p) => path.startsWith(p))) {
      return reply.redirect(`/login?next=${encodeURIComponent(request.url)}`, 302);
    }
    return refuse(reply, 401, 'Sign in first: send Authorization: Bearer <token>, or sign in at /login.');
  });
}

export const FORM_TOKEN_MESSAGE = 'This form has expired or did not come from the dashboard. Reload the page and try again.';

/** For form posts: the session's form token must come back in `_csrf` (bearer scripts skip it). */
export function checkFormToken(auth: SessionAuth, request: FastifyRequest, candidate: unknown): boolean {
  const who = authOf(request);
  return who.kind === 'bearer' || auth.checkCsrf(who.sid, candidate);
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
