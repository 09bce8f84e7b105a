import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SESSION_COOKIE, authOf, formTokenGuard } from './auth-hooks.js';
import { html } from './html.js';
import { page } from './layout.js';
import type { SessionAuth } from './session-auth.js';

/** Only paths of this site: `next=//evil.example` or `https://…` would be an open redirect. */
export function safeNext(next: unknown): string {
  return typeof next === 'string' && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/';
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

export function registerLoginRoutes(app: FastifyInstance, auth: SessionAuth): void {
  app.get('/login', async (request: FastifyRequest<{ Querystring: { next?: string } }>, reply) => {
    const next = safeNext(request.query.next);
    if (auth.insecure || authOf(request).kind === 'session') return reply.redirect(next, 303);
    return reply.type('text/html; charset=utf-8').send(loginPage(next));
  });

  app.post('/login', async (request: FastifyRequest<{ Body: { token?: unknown; next?: unknown } }>, reply: FastifyReply) => {
    const body = request.body ?? {};
    const next = safeNext(body.next);
    if (auth.insecure) return reply.redirect(next, 303);
    if (typeof body.token !== 'string' || !auth.checkToken(body.token.trim())) {
      return reply.code(401).type('text/html; charset=utf-8').send(loginPage(next, 'That token is not right. Check it and try again.'));
    }
    const session = auth.newSession();
    reply.setCookie(SESSION_COOKIE, session.cookie, {
      httpOnly: true,
      sameSite: 'strict',
      secure: request.protocol === 'https',
      path: '/',
      maxAge: session.maxAgeSeconds,
    });
    return reply.redirect(next, 303);
  });

  app.post('/logout', { preHandler: formTokenGuard(auth) }, async (request, reply) => {
    reply.clearCookie(SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'strict', secure: request.protocol === 'https' });
    return reply.redirect('/login', 303);
  });
}
