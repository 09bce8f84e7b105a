import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret, weakTokenReason } from '../../src/config/index.js';
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

describe('guesses sent at once (finding: the limit was read, the token checked, the count raised in three steps)', () => {
  const failuresKey = () => `${h.config.prefix}:dashboard:auth-failures:127.0.0.1`;
  /**
   * `n` requests as close to at once as a test can send them: every connection is opened first,
   * then every request is written whole in the same tick. Resolves with the status codes.
   */
  async function atOnce(n: number, request: (i: number) => string): Promise<number[]> {
    const sockets = await Promise.all(
      Array.from(
        { length: n },
        () =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(d.port, '127.0.0.1', () => resolve(socket));
            socket.on('error', reject);
          }),
      ),
    );
    const answers = sockets.map(
      (socket) =>
        new Promise<number>((resolve, reject) => {
          let head = '';
          socket.setEncoding('latin1');
          socket.on('data', (chunk: string) => {
            head += chunk;
            const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
            if (m) {
              resolve(Number(m[1]));
              socket.destroy();
            }
          });
          socket.on('error', reject);
          socket.on('close', () => reject(new Error(`connection closed before a status line: ${head.slice(0, 80)}`)));
        }),
    );
    sockets.forEach((socket, i) => socket.write(request(i)));
    return Promise.all(answers);
  }
  const rawSignIn = (token: string) => {
    const body = form({ token, next: '/' });
    return (
      `POST /login HTTP/1.1\r\nHost: ${d.host}\r\nOrigin: ${d.origin}\r\nConnection: close\r\n` +
      `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    );
  };
  const rawBearer = (token: string) =>
    `GET / HTTP/1.1\r\nHost: ${d.host}\r\nAuthorization: Bearer ${token}\r\nAccept: application/json\r\nConnection: close\r\n\r\n`;
  const signInWith = (token: string) =>
    d.ask({
      method: 'POST',
      path: '/login',
      headers: { origin: d.origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ token, next: '/' }),
    });
  const tally = (statuses: number[]) =>
    statuses.reduce<Record<number, number>>((t, s) => ({ ...t, [s]: (t[s] ?? 0) + 1 }), {});

  it('200 wrong sign-ins at once: at most 10 tokens are compared (401), the rest are refused unread (429)', async () => {
    await h.runtime.redis.del(failuresKey());
    try {
      const counts = tally(await atOnce(200, (i) => rawSignIn(`concurrent-guess-${i}`)));
      expect(counts[401] ?? 0).toBeLessThanOrEqual(10);
      expect((counts[401] ?? 0) + (counts[429] ?? 0)).toBe(200);
      // And the right token now is refused too: the client is locked out.
      expect((await signInWith(TOKEN)).status).toBe(429);
    } finally {
      await h.runtime.redis.del(failuresKey());
    }
  });

  it('a burst of 200 wrong bearer requests: at most 10 compared', async () => {
    await h.runtime.redis.del(failuresKey());
    try {
      const counts = tally(await atOnce(200, (i) => rawBearer(`burst-guess-${i}`)));
      expect(counts[401] ?? 0).toBeLessThanOrEqual(10);
      expect((counts[401] ?? 0) + (counts[429] ?? 0)).toBe(200);
    } finally {
      await h.runtime.redis.del(failuresKey());
    }
  });

  it("a script's burst of 40 right-token requests all get through, and leave no count behind", async () => {
    await h.runtime.redis.del(failuresKey());
    expect(tally(await atOnce(40, () => rawBearer(TOKEN)))).toEqual({ 200: 40 });
    expect(await h.runtime.redis.exists(failuresKey())).toBe(0);
  });
});

describe('trivially guessable tokens', () => {
  it.each([
    ['one character repeated', 'a'.repeat(32), /one character repeated/],
    ['a short unit repeated', 'abcd'.repeat(8), /same 4 characters over and over/],
    ['a few characters', 'aaaabbbbaaaabbbbaaaabbbbaaaabbbc', /only 3 different characters/],
    ['a run of consecutive characters', 'abcdefghijklmnopqrstuvwxyz0123456', /run of consecutive characters/],
  ])('refuses %s, saying why and never printing it', async (_name, token, why) => {
    const refused = buildDashboard({ runtime: h.runtime, token: new Secret(token) });
    await expect(refused).rejects.toThrow(why);
    await expect(refused).rejects.toThrow(/openssl rand -hex 16/);
    await expect(refused).rejects.not.toThrow(token);
  });

  it('accepts what openssl rand -hex 16 and -base64 24 make', () => {
    for (const token of ['3f9c0e1ab27d84c65e0f1d2c3b4a5968', 'q8Vt1mZ0x+KpL3r/9WcYb2NaHs4UeJ7d']) {
      expect(weakTokenReason(token)).toBeNull();
    }
  });
});

describe('secrets', () => {
  it('no answer this file got (any method) and no dashboard log line carries the API key, the token or the cookie secret', () => {
    expect(secretLeaks()).toEqual([]);
  });
});
