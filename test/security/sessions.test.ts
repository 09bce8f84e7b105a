import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_COOKIE } from '../../src/dashboard/index.js';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { TOKEN, cookieOf, form, startLiveDashboard, secretLeaks, type LiveDashboard } from './live-dashboard.js';

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

const page = (live: LiveDashboard, cookie: string) => live.ask({ path: '/', headers: { cookie } });
const sessionKeys = async () => {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, found] = await h.runtime.redis.scan(
      cursor,
      'MATCH',
      `${h.config.prefix}:dashboard:session:*`,
      'COUNT',
      1000,
    );
    cursor = next;
    keys.push(...found);
  } while (cursor !== '0');
  return keys;
};

describe('sessions live in Redis (finding: sign-out did not end a session)', () => {
  it('sign-out revokes the session: a copy of the cookie taken before is refused', async () => {
    const cookie = await d.signIn();
    expect((await page(d, cookie)).status).toBe(200);
    const out = await d.postForm('/logout', cookie);
    expect(out.status).toBe(303);
    expect(out.headers['set-cookie']?.join(';')).toContain(`${SESSION_COOKIE}=;`);
    const after = await page(d, cookie);
    expect(after.status).toBe(302);
    expect(after.headers.location).toBe('/login?next=%2F');
  });

  it('the cookie holds only a signed random id; Redis holds a record with a bounded TTL', async () => {
    const before = new Set(await sessionKeys());
    const cookie = await d.signIn();
    const value = decodeURIComponent(cookie.split('=')[1]!);
    expect(value).not.toContain(TOKEN);
    expect(value).toMatch(/^[A-Za-z0-9_-]{43}\.[A-Za-z0-9+/_-]+=*$/);
    const added = (await sessionKeys()).filter((k) => !before.has(k));
    expect(added).toHaveLength(1);
    // The key names a hash of the id, not the id.
    expect(added[0]).not.toContain(value.split('.')[0]);
    const ttl = await h.runtime.redis.pttl(added[0]!);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(30 * 60_000);
  });

  it('every sign-in gets a new id, and the one the browser had ends', async () => {
    const first = await d.signIn();
    const res = await d.ask({
      method: 'POST',
      path: '/login',
      headers: { cookie: first, origin: d.origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ token: TOKEN }),
    });
    const second = cookieOf(res)!;
    expect(second).not.toBe(first);
    expect((await page(d, first)).status).toBe(302);
    expect((await page(d, second)).status).toBe(200);
  });

  it('ends a session after its idle time and after its absolute lifetime, used or not', async () => {
    // Margins of 750 ms and more either side: a loaded CI machine answers a request in up to ~0.4 s.
    const short = await startLiveDashboard({ harness: h, dashboard: { sessionIdleMs: 1000, sessionTtlMs: 3000 } });
    try {
      const idle = await short.signIn();
      await sleep(1400);
      expect((await page(short, idle)).status).toBe(302);
      // Used every 250 ms, it outlives the 1 s idle time, but not its 3 s lifetime.
      const busy = await short.signIn();
      // The session began before signIn returned, so its lifetime ends by this plus 3 s.
      const signedInBy = Date.now();
      for (let i = 0; i < 5; i++) {
        await sleep(250);
        expect((await page(short, busy)).status, `use ${i}`).toBe(200);
      }
      while (Date.now() - signedInBy < 3100) {
        await sleep(250);
        await page(short, busy);
      }
      expect((await page(short, busy)).status).toBe(302);
    } finally {
      await short.close();
    }
  });

  it('a new token signs everyone out, in every dashboard process (finding: stateless cookie)', async () => {
    const oldTokenApp = await startLiveDashboard({ harness: h });
    try {
      const cookie = await oldTokenApp.signIn();
      expect((await page(oldTokenApp, cookie)).status).toBe(200);
      const newTokenApp = await startLiveDashboard({ harness: h, token: `${TOKEN}-rotated` });
      try {
        expect((await page(newTokenApp, cookie)).status).toBe(302);
        // Starting with the new token removed the old token's records: the old process refuses too.
        expect((await page(oldTokenApp, cookie)).status).toBe(302);
        expect(newTokenApp.logs.some((l) => /token changed/.test(l.msg))).toBe(true);
      } finally {
        await newTokenApp.close();
      }
    } finally {
      await oldTokenApp.close();
    }
  });
});

describe('HTTPS behind a proxy (findings: no trustProxy, Origin compared without the scheme)', () => {
  const tls = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'dash.example' };

  it('with trustProxy, a request that came over HTTPS gets a Secure cookie and HSTS', async () => {
    const proxied = await startLiveDashboard({ harness: h, dashboard: { trustProxy: ['127.0.0.1'] } });
    try {
      const res = await proxied.ask({
        method: 'POST',
        path: '/login',
        headers: { ...tls, origin: 'https://dash.example', 'content-type': 'application/x-www-form-urlencoded' },
        body: form({ token: TOKEN }),
      });
      expect(res.status).toBe(303);
      const set = res.headers['set-cookie']!.join(';');
      expect(set).toMatch(/; Secure/);
      expect(set).toMatch(/HttpOnly/);
      expect(set).toMatch(/SameSite=Strict/);
      expect(res.headers['strict-transport-security']).toBe('max-age=31536000');
      // Plain HTTP on the same dashboard: no HSTS, no Secure.
      const plain = await proxied.ask({ path: '/login' });
      expect(plain.headers['strict-transport-security']).toBeUndefined();
    } finally {
      await proxied.close();
    }
  });

  it('without trustProxy, X-Forwarded-Proto from anyone is not believed', async () => {
    const res = await d.ask({
      method: 'POST',
      path: '/login',
      headers: { 'x-forwarded-proto': 'https', origin: d.origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ token: TOKEN }),
    });
    expect(res.status).toBe(303);
    expect(res.headers['set-cookie']!.join(';')).not.toMatch(/Secure/);
    expect(res.headers['strict-transport-security']).toBeUndefined();
  });

  it('the Origin check compares scheme, host and port', async () => {
    const cookie = await d.signIn();
    const _csrf = await d.formToken(cookie);
    const post = (origin: string) =>
      d.ask({
        method: 'POST',
        path: '/workspaces/acme/pause',
        headers: { cookie, origin, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form({ _csrf }),
      });
    for (const origin of [
      `https://${d.host}`,
      `http://127.0.0.1:${d.port + 1}`,
      'http://localhost',
      `http://${d.host}.evil.example`,
      'null',
    ]) {
      expect((await post(origin)).status, origin).toBe(403);
    }
    expect(await h.runtime.queue('acme').isPaused()).toBe(false);

    const proxied = await startLiveDashboard({ harness: h, dashboard: { trustProxy: ['127.0.0.1'] } });
    try {
      const c = cookieOf(
        await proxied.ask({
          method: 'POST',
          path: '/login',
          headers: { ...tls, origin: 'https://dash.example', 'content-type': 'application/x-www-form-urlencoded' },
          body: form({ token: TOKEN }),
        }),
      )!;
      const token = /name="_csrf" value="([^"]+)"/.exec(
        (await proxied.ask({ path: '/workspaces', headers: { ...tls, cookie: c } })).text,
      )![1]!;
      const send = (origin: string) =>
        proxied.ask({
          method: 'POST',
          path: '/workspaces/acme/resume',
          headers: {
            ...tls,
            cookie: c,
            origin,
            'content-type': 'application/x-www-form-urlencoded',
            accept: 'application/json',
          },
          body: form({ _csrf: token }),
        });
      expect((await send('http://dash.example')).status).toBe(403);
      expect((await send('https://dash.example')).status).toBe(200);
    } finally {
      await proxied.close();
    }
  });
});

describe('secrets', () => {
  it('no answer this file got (any method) and no dashboard log line carries the API key, the token or the cookie secret', () => {
    expect(secretLeaks()).toEqual([]);
  });
});
