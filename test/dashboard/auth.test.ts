import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/runtime/index.js';
import { buildDashboard, SESSION_COOKIE } from '../../src/dashboard/index.js';
import { csv } from '../helpers/pipeline.js';
import {
  HOST,
  ORIGIN,
  TOKEN,
  csrfOf,
  form,
  signIn,
  startDashboardHarness,
  type DashboardHarness,
} from './dashboard-fixture.js';

let d: DashboardHarness;
let runId: string;
beforeAll(async () => {
  d = await startDashboardHarness({ records: 10 });
  await d.h.startWorkers();
  const deal = [...d.h.ws.deals.values()][0]!;
  const file = d.h.file('one.csv', csv(['id', 'name'], [[deal.id, 'Renamed']]));
  runId = (await d.h.waitForRun((await d.h.importFile(file, 'deal.update')).id)).id;
});
afterAll(async () => d?.close());

const post = (url: string, headers: Record<string, string>, payload = '') =>
  d.app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    payload,
  });

describe('who gets in', () => {
  it('sends a browser without a session to the sign-in form, and scripts a 401', async () => {
    const page = await d.app.inject({ url: `/runs/${runId}?q=x`, headers: { host: HOST } });
    expect(page.statusCode).toBe(302);
    expect(page.headers.location).toBe(`/login?next=${encodeURIComponent(`/runs/${runId}?q=x`)}`);
    for (const url of ['/metrics', '/queues/api/queues']) {
      const res = await d.app.inject({ url, headers: { host: HOST } });
      expect(res.statusCode, url).toBe(401);
    }
    const action = await post(`/runs/${runId}/retry`, { host: HOST, origin: ORIGIN });
    expect(action.statusCode).toBe(401);
    expect((await d.app.inject({ url: '/queues', headers: { host: HOST } })).statusCode).toBe(302);
  });

  it('refuses a wrong bearer token with a plain message, accepts the right one', async () => {
    const wrong = await d.app.inject({ url: '/', headers: { host: HOST, authorization: 'Bearer nope' } });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).toContain('Wrong dashboard token');
    expect(wrong.body).not.toContain(TOKEN);
    const right = await d.app.inject({ url: '/', headers: d.bearer });
    expect(right.statusCode).toBe(200);
    expect(right.body).toContain(runId);
    const metrics = await d.app.inject({ url: '/metrics', headers: d.bearer });
    expect(metrics.statusCode).toBe(200);
  });

  it('keeps /healthz and /readyz open', async () => {
    const health = await d.app.inject({ url: '/healthz' });
    expect(health.statusCode).toBe(200);
    const ready = await d.app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(200);
  });

  it('answers 503 on /readyz when Redis does not answer', async () => {
    const port = await freePort();
    const dead = new Redis({
      host: '127.0.0.1',
      port,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    const app = await buildDashboard({ runtime: { ...d.h.runtime, redis: dead }, token: null, readyTimeoutMs: 500 });
    try {
      const res = await app.inject({ url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await app.close();
      dead.disconnect();
    }
  });

  it('signs in through the form with an HttpOnly, SameSite=Strict cookie that does not hold the token', async () => {
    const wrong = await post('/login', { host: HOST, origin: ORIGIN }, form({ token: 'not-it', next: '/' }));
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).toContain('That token is not right');
    expect(wrong.cookies).toHaveLength(0);

    const res = await post('/login', { host: HOST, origin: ORIGIN }, form({ token: TOKEN, next: `/runs/${runId}` }));
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/runs/${runId}`);
    const cookie = res.cookies.find((c) => c.name === SESSION_COOKIE)!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(cookie.value).not.toContain(TOKEN);
    const page = await d.app.inject({
      url: `/runs/${runId}`,
      headers: { host: HOST, cookie: `${SESSION_COOKIE}=${cookie.value}` },
    });
    expect(page.statusCode).toBe(200);
  });

  it('never redirects off-site after sign-in', async () => {
    const res = await post('/login', { host: HOST, origin: ORIGIN }, form({ token: TOKEN, next: '//evil.example/x' }));
    expect(res.headers.location).toBe('/');
  });

  it('rejects a tampered or forged session cookie', async () => {
    const good = await signIn(d.app);
    const value = decodeURIComponent(good.split('=')[1]!);
    const dot = value.lastIndexOf('.');
    const [sid, mac] = [value.slice(0, dot), value.slice(dot + 1)];
    const flipped = `${sid.slice(0, -1)}${sid.endsWith('A') ? 'B' : 'A'}`;
    for (const cookie of [
      `${SESSION_COOKIE}=${flipped}.${mac}`,
      `${SESSION_COOKIE}=${sid}.${mac.slice(1)}`,
      `${SESSION_COOKIE}=${sid}`,
      `${SESSION_COOKIE}=abc.xyz`,
    ]) {
      const res = await d.app.inject({ url: '/', headers: { host: HOST, cookie } });
      expect(res.statusCode, cookie).toBe(302);
    }
    expect((await d.app.inject({ url: '/', headers: { host: HOST, cookie: good } })).statusCode).toBe(200);
  });

  it('signs out: the cookie is cleared and the session is over on the server too', async () => {
    const cookie = await signIn(d.app);
    const page = await d.app.inject({ url: '/', headers: { host: HOST, cookie } });
    const res = await post('/logout', { host: HOST, origin: ORIGIN, cookie }, form({ _csrf: csrfOf(page.body) }));
    expect(res.statusCode).toBe(303);
    expect(res.cookies.find((c) => c.name === SESSION_COOKIE)?.value).toBe('');
    // A copy of the cookie taken before sign-out no longer opens anything.
    expect((await d.app.inject({ url: '/', headers: { host: HOST, cookie } })).statusCode).toBe(302);
  });
});

describe('cross-site requests', () => {
  it('refuses a post from another site, without Origin, or without the form token', async () => {
    const page = await d.get(`/runs/${runId}`);
    const _csrf = csrfOf(page.body);
    const cases: Array<[string, Record<string, string>, string]> = [
      ['bad Origin', { origin: 'http://evil.example' }, form({ _csrf })],
      ['cross-site fetch metadata', { 'sec-fetch-site': 'cross-site' }, form({ _csrf })],
      [
        'same-site but other origin',
        { 'sec-fetch-site': 'same-site', origin: 'http://other.dash.test' },
        form({ _csrf }),
      ],
      ['neither Origin nor Sec-Fetch-Site', {}, form({ _csrf })],
      ['no form token', { origin: ORIGIN }, ''],
      ['wrong form token', { origin: ORIGIN }, form({ _csrf: 'forged' })],
    ];
    for (const [name, headers, payload] of cases) {
      const res = await post('/workspaces/acme/pause', { ...d.browser, ...headers }, payload);
      expect(res.statusCode, name).toBe(403);
    }
    expect(await d.h.runtime.queue('acme').isPaused()).toBe(false);
    // The form token of another session does not work either.
    const other = csrfOf((await d.app.inject({ url: '/', headers: { host: HOST, cookie: await signIn(d.app) } })).body);
    expect(
      (await post('/workspaces/acme/pause', { ...d.browser, origin: ORIGIN }, form({ _csrf: other }))).statusCode,
    ).toBe(403);
  });

  it('accepts the same post from the page itself, and from a bearer script without a form token', async () => {
    const _csrf = csrfOf((await d.get('/workspaces')).body);
    const browser = await post(
      '/workspaces/acme/pause',
      { ...d.browser, origin: ORIGIN, 'sec-fetch-site': 'same-origin' },
      form({ _csrf }),
    );
    expect(browser.statusCode).toBe(303);
    expect(await d.h.runtime.queue('acme').isPaused()).toBe(true);
    const script = await post('/workspaces/acme/resume', { ...d.bearer, accept: 'application/json' });
    expect(script.statusCode).toBe(200);
    expect(script.json()).toMatchObject({ workspace: 'acme', paused: false });
    expect(await d.h.runtime.queue('acme').isPaused()).toBe(false);
  });
});

describe('without a token (--insecure-no-auth)', () => {
  it('opens the pages to loopback host names only, and still refuses cross-site posts', async () => {
    const app = await buildDashboard({ runtime: d.h.runtime, token: null });
    const local = '127.0.0.1:3000';
    try {
      expect((await app.inject({ url: '/', headers: { host: local } })).statusCode).toBe(200);
      expect((await app.inject({ url: '/', headers: { host: 'localhost:3000' } })).statusCode).toBe(200);
      expect((await app.inject({ url: '/', headers: { host: HOST } })).statusCode).toBe(403);
      const page = await app.inject({ url: '/workspaces', headers: { host: local } });
      const res = await app.inject({
        method: 'POST',
        url: '/workspaces/acme/pause',
        headers: { host: local, origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
        payload: form({ _csrf: csrfOf(page.body) }),
      });
      expect(res.statusCode).toBe(403);
      expect(await d.h.runtime.queue('acme').isPaused()).toBe(false);
    } finally {
      await app.close();
    }
  });
});
