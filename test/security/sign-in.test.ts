import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { TOKEN, form, startLiveDashboard, secretLeaks, type LiveDashboard } from './live-dashboard.js';

let h: Harness;
let d: LiveDashboard;
beforeAll(async () => {
  h = await startHarness({ records: 5 });
  d = await startLiveDashboard({ harness: h });
});
afterAll(async () => {
  await d?.close();
  await h?.close();
});

describe('open redirect after sign-in (finding: safeNext checked two characters)', () => {
  const evil = [
    '/%09/evil.example',
    '/%0d/x',
    '/%0a/x',
    '//evil.example',
    '/\\evil.example',
    '/%5Cevil.example',
    'https://evil.example/',
    '/%2F%2Fevil.example',
    '/\t/evil.example',
    '/%E2%80%A8x',
    'javascript:alert(1)',
    // Dot segments the URL parser removes, leaving a path that starts with `//` (protocol-relative).
    '/..//evil.example',
    '/%2e%2e//evil.example',
    '/.//evil.example',
    '/%2e//evil.example',
    '/a/..//evil.example',
  ];

  it('signed in, GET /login?next=… never leaves the origin and never answers 500', async () => {
    const cookie = await d.signIn();
    for (const next of evil) {
      const res = await d.ask({
        path: `/login?next=${next.startsWith('/%') || next.startsWith('//') ? next : encodeURIComponent(next)}`,
        headers: { cookie },
      });
      expect(res.status, next).toBe(303);
      const location = res.headers.location ?? '';
      expect(location, next).toMatch(/^\/(?![/\\])/);
      // eslint-disable-next-line no-control-regex -- finding control characters is the point
      expect(location, next).not.toMatch(/[\u0000-\u001f\u007f]/);
      // What a browser makes of it stays on the dashboard.
      expect(new URL(location, d.origin).origin, next).toBe(d.origin);
    }
    const tab = await d.ask({ path: '/login?next=/%09/evil.example', headers: { cookie } });
    expect(tab.headers.location).toBe('/');
    const good = await d.ask({
      path: `/login?next=${encodeURIComponent('/runs/x?q=stage#problems')}`,
      headers: { cookie },
    });
    expect(good.headers.location).toBe('/runs/x?q=stage#problems');
  });

  it('the sign-in form keeps the same rule', async () => {
    for (const next of [
      '/\t/evil.example',
      '/\r/x',
      '//evil.example',
      '/..//evil.example',
      '/%2e%2e//evil.example',
      '/.//evil.example',
      '/ok?a=1',
    ]) {
      const res = await d.ask({
        method: 'POST',
        path: '/login',
        headers: { origin: d.origin, 'content-type': 'application/x-www-form-urlencoded' },
        body: form({ token: TOKEN, next }),
      });
      expect(res.status, next).toBe(303);
      expect(res.headers.location, next).toBe(next === '/ok?a=1' ? '/ok?a=1' : '/');
    }
  });
});

describe('guessing the token (findings: any token accepted, no limit)', () => {
  it('refuses to start with a token shorter than 32 characters, saying how to make one', async () => {
    await expect(buildDashboard({ runtime: h.runtime, token: new Secret('7') })).rejects.toThrow(
      /at least 32 .*openssl rand -hex 16/,
    );
    await expect(buildDashboard({ runtime: h.runtime, token: new Secret('x'.repeat(31)) })).rejects.toThrow(
      /31 characters/,
    );
  });

  it('limits wrong bearer tokens per client, across dashboard processes, with Retry-After and one log line per burst', async () => {
    const a = await startLiveDashboard({
      harness: h,
      dashboard: { authFailures: { maxFailures: 5, windowMs: 60_000 } },
    });
    const b = await startLiveDashboard({
      harness: h,
      dashboard: { authFailures: { maxFailures: 5, windowMs: 60_000 } },
    });
    try {
      const bearer = (live: LiveDashboard, token: string) =>
        live.ask({ path: '/', headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
      for (let i = 0; i < 3; i++) expect((await bearer(a, `wrong-${i}`)).status).toBe(401);
      for (let i = 3; i < 5; i++) expect((await bearer(b, `wrong-${i}`)).status).toBe(401);
      // Five failures spread over two processes: both now refuse this client, even the right token.
      for (const live of [a, b]) {
        const res = await bearer(live, TOKEN);
        expect(res.status).toBe(429);
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
        expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
        expect(res.text).toContain('Too many wrong tokens');
      }
      const signIn = await a.ask({
        method: 'POST',
        path: '/login',
        headers: { origin: a.origin, 'content-type': 'application/x-www-form-urlencoded' },
        body: form({ token: TOKEN }),
      });
      expect(signIn.status).toBe(429);
      expect(signIn.headers['retry-after']).toBeDefined();
      expect(signIn.headers['set-cookie']).toBeUndefined();
      const bursts = [...a.logs, ...b.logs].filter((l) => /wrong tokens from/.test(l.msg));
      expect(bursts).toHaveLength(1);
      expect(bursts[0]).toMatchObject({ level: 40, failures: 5 });
      // Probes and the sign-in page stay open.
      expect((await a.ask({ path: '/healthz' })).status).toBe(200);
    } finally {
      await a.close();
      await b.close();
      await h.runtime.redis.del(`${h.config.prefix}:dashboard:auth-failures:127.0.0.1`);
    }
  });

  it('counts failed sign-ins through the form too, and never the right ones', async () => {
    const live = await startLiveDashboard({
      harness: h,
      dashboard: { authFailures: { maxFailures: 3, windowMs: 60_000 } },
    });
    try {
      const attempt = (token: string) =>
        live.ask({
          method: 'POST',
          path: '/login',
          headers: { origin: live.origin, 'content-type': 'application/x-www-form-urlencoded' },
          body: form({ token }),
        });
      for (let i = 0; i < 5; i++) expect((await attempt(TOKEN)).status).toBe(303);
      for (let i = 0; i < 3; i++) expect((await attempt(`guess-${i}`)).status).toBe(401);
      const locked = await attempt(TOKEN);
      expect(locked.status).toBe(429);
      expect(locked.text).toContain('Too many wrong tokens');
    } finally {
      await live.close();
      await h.runtime.redis.del(`${h.config.prefix}:dashboard:auth-failures:127.0.0.1`);
    }
  });
});

describe('secrets', () => {
  it('no answer this file got (any method) and no dashboard log line carries the API key, the token or the cookie secret', () => {
    expect(secretLeaks()).toEqual([]);
  });
});
