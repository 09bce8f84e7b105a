import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  SESSION_COOKIE,
  authOf,
  formTokenGuard,
  ownOrigin,
  sessionOf,
  tooManyMessage,
  type AuthHookDeps,
} from './auth-hooks.js';
import { html } from './html.js';
import { page } from './layout.js';

/** Anything below U+0020, DEL, and the backslash browsers read as a slash. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNSAFE_CHARS = /[\u0000-\u001f\u007f\\]/;

/**
 * A Location that starts with one slash and no second slash or backslash: a path on this host.
 * `//host` or `/\\host` would be read by a browser as another host (protocol-relative).
 */
const SAME_HOST_PATH = /^\/(?![/\\])/;

/**
 * Where to go after signing in: `next` resolved against the dashboard's own origin by the URL
 * parser, kept only when it stays on that origin and holds no control characters, else `/`.
 * What comes back is the parser's own serialisation (path, query, fragment), so nothing a
 * browser could read differently from us reaches the Location header. That serialisation is
 * checked once more: removing dot segments can leave a path that starts with `//`
 * (`/..//evil.example` → `//evil.example`), which as a Location goes to another host.
 */
export function safeNext(next: unknown, origin: string | null): string {
  if (
    typeof next !== 'string' ||
    origin === null ||
    !next.startsWith('/') ||
    next.length > 2048 ||
    UNSAFE_CHARS.test(next)
  )
    return '/';
  try {
    const url = new URL(next, origin);
    if (url.origin !== origin) return '/';
    const location = `${url.pathname}${url.search}${url.hash}`;
    return SAME_HOST_PATH.test(location) ? location : '/';
  } catch {
    return '/';
  }
}

function loginPage(next: string, error?: string): string {
  return page({
    title: 'Sign in',
    body: html`<div class="login card">
  <h1>Sign in</h1>
  <p class="sub">Enter the dashboard token (the value of <code>CRM_SYNC_DASHBOARD_TOKEN</code>).</p>
  ${error !== undefined ? html`<div class="notice bad" role="alert">${error}</div>` : ''}
  <form method="post" action="/login">
    <input type="hidden" name="next" value="${next}">
    <label for="token">Token</label>
    <input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
    <button class="primary" type="submit">Sign in</button>
  </form>
</div>`,
  });
}

function cookieOptions(request: FastifyRequest) {
  // No Max-Age: a browser session cookie; Redis ends the session (idle and absolute limits).
  return { httpOnly: true, sameSite: 'strict' as const, secure: request.protocol === 'https', path: '/' };
}

export function registerLoginRoutes(app: FastifyInstance, deps: AuthHookDeps): void {
  const { auth, sessions, throttle } = deps;

  app.get('/login', async (request: FastifyRequest<{ Querystring: { next?: string } }>, reply) => {
    const next = safeNext(request.query.next, ownOrigin(request));
    if (auth.insecure || authOf(request).kind === 'session') return reply.redirect(next, 303);
    return reply.type('text/html; charset=utf-8').send(loginPage(next));
  });

  app.post(
    '/login',
    async (request: FastifyRequest<{ Body: { token?: unknown; next?: unknown } }>, reply: FastifyReply) => {
      const body = request.body ?? {};
      const next = safeNext(body.next, ownOrigin(request));
      if (auth.insecure || sessions === null) return reply.redirect(next, 303);
      // Counted before it is compared: see auth-throttle.ts.
      const attempt = await throttle?.attempt(request);
      if (attempt?.allowed === false) {
        return reply
          .code(429)
          .header('Retry-After', String(attempt.waitSeconds))
          .type('text/html; charset=utf-8')
          .send(loginPage(next, tooManyMessage(attempt.waitSeconds)));
      }
      if (typeof body.token !== 'string' || !auth.checkToken(body.token.trim())) {
        await attempt?.failed();
        return reply
          .code(401)
          .type('text/html; charset=utf-8')
          .send(loginPage(next, 'That token is not right. Check it and try again.'));
      }
      await attempt?.succeeded();
      // A fresh id on every sign-in; a session the browser still had ends here.
      const previous = await sessionOf(request, sessions);
      if (previous !== null) await sessions.revoke(previous);
      const sid = await sessions.create();
      reply.setCookie(SESSION_COOKIE, sid, { ...cookieOptions(request), signed: true });
      return reply.redirect(next, 303);
    },
  );

  app.post('/logout', { preHandler: formTokenGuard(auth) }, async (request, reply) => {
    const who = authOf(request);
    if (who.kind === 'session' && sessions !== null) await sessions.revoke(who.sid);
    reply.clearCookie(SESSION_COOKIE, cookieOptions(request));
    return reply.redirect('/login', 303);
  });
}
