import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METRIC, MetricsRecorder } from '../../src/metrics/index.js';
import { queueName } from '../../src/queue/index.js';
import { saveUploadAnswer } from '../../src/dashboard/upload-answers.js';
import {
  TOKEN,
  form,
  multipartBody,
  seedFailedRun,
  startLiveDashboard,
  secretLeaks,
  type LiveDashboard,
} from './live-dashboard.js';
import { fill, listRoutes, type Route } from './routes.js';

/**
 * The holds, over real HTTP against a dashboard serving only workspace acme (`-w acme`): auth
 * on every route, CSRF on every state-changing route, Bull Board read-only, no secret in any
 * answer, no-store everywhere; and the findings about scope, resume, ids and multipart.
 */
let d: LiveDashboard;
let cookie: string;
let acmeRun: string;
let otherRun: string;
let routes: Route[];
const bearer = { authorization: `Bearer ${TOKEN}` };
const OPEN = new Set([
  '/healthz',
  '/readyz',
  '/login',
  '/static/dashboard.css',
  '/static/dashboard.js',
  // The chart library: public code, served like the dashboard's own assets.
  '/static/uplot.min.css',
  '/static/uplot.min.js',
]);

beforeAll(async () => {
  d = await startLiveDashboard({ harnessOptions: { records: 5 }, dashboard: { workspaces: ['acme'] } });
  acmeRun = await seedFailedRun(d.h.runtime.store, 3);
  otherRun = await seedFailedRun(d.h.runtime.store, 2, 'globex');
  cookie = await d.signIn();
  routes = listRoutes(d.app);
});
afterAll(async () => d?.close());

const pathOf = (r: Route) => fill(r.pattern, { runId: acmeRun, workspace: 'acme', queueName: queueName('acme') });
const unsafe = () => routes.filter((r) => r.method !== 'GET');

describe('holds', () => {
  it('knows the routes it checks (the dashboard and Bull Board)', () => {
    expect(routes.length).toBeGreaterThan(40);
    expect(routes).toContainEqual({ method: 'POST', pattern: '/runs/:id/upload' });
    expect(routes).toContainEqual({ method: 'PUT', pattern: '/queues/api/queues/:queueName/clean/:queueStatus' });
  });

  it('serves the chart library itself; a page with charts runs no inline script and loads nothing from elsewhere', async () => {
    expect(routes).toContainEqual({ method: 'GET', pattern: '/static/uplot.min.js' });
    const res = await d.ask({ path: `/runs/${acmeRun}`, headers: { cookie } });
    expect(res.status).toBe(200);
    const csp = String(res.headers['content-security-policy']);
    // No script-src: scripts fall back to default-src 'self', so no inline script and no eval.
    expect(csp).toContain("default-src 'self'");
    expect(csp).not.toMatch(/script-src|unsafe-eval|https?:/);
    const scripts = [...res.text.matchAll(/<script\b([^>]*)>/g)].map((m) => m[1]!.trim());
    expect(scripts).toContain('src="/static/uplot.min.js" defer');
    for (const attrs of scripts) expect(attrs).toMatch(/^src="\/static\/[\w.]+" defer$|^type="application\/json"/);
    expect(res.text).not.toMatch(/(href|src)="(https?:)?\/\//);
  });

  it('every route but the probes, the sign-in form and its assets needs the token', async () => {
    for (const r of routes) {
      const path = pathOf(r);
      const res = await d.ask({
        method: r.method,
        path,
        headers: { origin: d.origin, 'content-type': 'application/x-www-form-urlencoded' },
        body: r.method === 'GET' ? undefined : '',
      });
      const where = `${r.method} ${path}`;
      if (OPEN.has(r.pattern)) {
        expect(res.status, where).not.toBe(302);
        continue;
      }
      if (r.method === 'GET' && !r.pattern.startsWith('/metrics') && !r.pattern.startsWith('/queues/api/')) {
        expect(res.status, where).toBe(302);
        expect(res.headers.location, where).toMatch(/^\/login\?next=/);
      } else {
        expect(res.status, where).toBe(401);
      }
    }
  });

  it('every state-changing route refuses a cross-site request, and one without the form token', async () => {
    const _csrf = await d.formToken(cookie);
    for (const r of unsafe()) {
      const path = pathOf(r);
      const where = `${r.method} ${path}`;
      const send = (headers: Record<string, string>, body: string) =>
        d.ask({
          method: r.method,
          path,
          headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
          body,
        });
      expect((await send({ origin: 'http://evil.example' }, form({ _csrf }))).status, `${where} cross-site`).toBe(403);
      expect((await send({ 'sec-fetch-site': 'cross-site' }, form({ _csrf }))).status, `${where} fetch metadata`).toBe(
        403,
      );
      expect((await send({}, form({ _csrf }))).status, `${where} no origin`).toBe(403);
      if (r.pattern === '/login') continue; // no session yet, so no form token: the origin check is its guard
      const bare = multipartBody({}, { name: 'f.csv', content: 'crm_sync_row,name\n1,x\n' });
      const noToken = r.pattern.endsWith('/upload')
        ? await d.ask({
            method: r.method,
            path,
            headers: { cookie, origin: d.origin, 'content-type': bare.type },
            body: bare.body,
          })
        : await send({ origin: d.origin }, '');
      expect(noToken.status, `${where} no form token`).toBe(r.pattern.startsWith('/queues') ? 405 : 403);
    }
    expect(await d.h.runtime.queue('acme').isPaused()).toBe(false);
    expect((await d.h.runtime.store.requireRun(acmeRun)).counts.failed).toBe(3);
  });

  it('Bull Board is read-only: every write route refuses, even a bearer script, and the job stays', async () => {
    const queue = d.h.runtime.queue('acme');
    await queue.add(
      'contact.update',
      { runId: acmeRun, row: 1, line: 2, payload: { op: 'contact.update', id: 'x', body: {} }, original: {} } as never,
      { jobId: 'probe', delay: 3_600_000 },
    );
    try {
      const writes = unsafe().filter((r) => r.pattern.startsWith('/queues'));
      expect(writes.length).toBeGreaterThan(15);
      for (const r of writes) {
        const path = pathOf(r).replace('no-such-job', 'probe');
        const res = await d.ask({
          method: r.method,
          path,
          headers: { ...bearer, 'content-type': 'application/json' },
          body: '{}',
        });
        expect(res.status, `${r.method} ${path}`).toBe(405);
      }
      expect(await queue.getJobState('probe')).toBe('delayed');
      expect(await queue.isPaused()).toBe(false);
      const listed = (await d.ask({ path: '/queues/api/queues', headers: bearer })).json<{
        queues: Array<{ readOnlyMode: boolean }>;
      }>();
      expect(listed.queues.every((q) => q.readOnlyMode)).toBe(true);
    } finally {
      await queue.remove('probe');
    }
  });

  it('no answer carries the API key, the dashboard token or a cookie secret; all say Cache-Control: no-store', async () => {
    const gets = routes.filter((r) => r.method === 'GET').map(pathOf);
    gets.push(
      `/runs/${acmeRun}/results.csv?failed=1`,
      `/?status=completed`,
      `/runs/${acmeRun}?q=stage`,
      '/runs/20990101-000000-000-000zzzzz',
      '/login?next=/x',
    );
    for (const headers of [{ cookie }, { ...bearer, accept: 'application/json' }] as Array<Record<string, string>>) {
      for (const path of gets) {
        const res = await d.ask({ path, headers });
        const all = `${JSON.stringify(res.headers)}\n${res.text}`;
        expect(all, path).not.toContain(d.h.apiKey);
        expect(all, path).not.toContain(TOKEN);
        const type = String(res.headers['content-type'] ?? '');
        if (!path.startsWith('/static/') && !path.startsWith('/queues/static')) {
          if (/json|csv|html|text\/plain/.test(type))
            expect(res.headers['cache-control'], `${path} ${type}`).toBe('no-store');
        }
      }
    }
  });
});

describe('findings', () => {
  it('run ids shaped like Redis keys are 404 on every run route, never 500', async () => {
    const _csrf = await d.formToken(cookie);
    for (const id of [
      `${acmeRun}:results:0`,
      `${acmeRun}:problems`,
      `${acmeRun}:rounds`,
      'x'.repeat(90),
      '%2e%2e',
      `${acmeRun}%00`,
    ]) {
      for (const [method, suffix] of [
        ['GET', ''],
        ['GET', '/results.csv'],
        ['POST', '/retry'],
        ['POST', '/resume'],
      ] as const) {
        const res = await d.ask({
          method,
          path: `/runs/${id}${suffix}`,
          headers: {
            cookie,
            origin: d.origin,
            accept: 'application/json',
            'content-type': 'application/x-www-form-urlencoded',
          },
          body: method === 'POST' ? form({ _csrf }) : undefined,
        });
        expect(res.status, `${method} ${id}${suffix}`).toBe(404);
        expect(res.json<{ error: string }>().error).toBe('RUN_NOT_FOUND');
      }
    }
  });

  it("-w acme serves only acme: another workspace's run is 404 on every route", async () => {
    const _csrf = await d.formToken(cookie);
    const json = { cookie, accept: 'application/json' };
    expect((await d.ask({ path: `/runs/${otherRun}`, headers: json })).status).toBe(404);
    expect((await d.ask({ path: `/runs/${otherRun}/results.csv`, headers: { cookie } })).status).toBe(404);
    for (const action of ['retry', 'resume']) {
      const res = await d.ask({
        method: 'POST',
        path: `/runs/${otherRun}/${action}`,
        headers: { ...json, origin: d.origin, 'content-type': 'application/x-www-form-urlencoded' },
        body: form({ _csrf }),
      });
      expect(res.status, action).toBe(404);
    }
    const upload = multipartBody(
      { _csrf },
      { name: 'f.csv', content: `crm_sync_run_id,crm_sync_row,name\n${otherRun},1,x\n` },
    );
    expect(
      (
        await d.ask({
          method: 'POST',
          path: `/runs/${otherRun}/upload`,
          headers: { cookie, origin: d.origin, 'content-type': upload.type },
          body: upload.body,
        })
      ).status,
    ).toBe(404);
    expect((await d.h.runtime.store.requireRun(otherRun)).counts.failed).toBe(2);
    // Cancel is 404 like the rest (not 409 "already finished", which would tell the run exists).
    const cancel = await d.ask({
      method: 'POST',
      path: `/runs/${otherRun}/cancel`,
      headers: { ...json, origin: d.origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: form({ _csrf }),
    });
    expect(cancel.status).toBe(404);
    expect(cancel.json<{ error: string }>().error).toBe('RUN_NOT_FOUND');
    expect((await d.h.runtime.store.requireRun(otherRun)).status).toBe('completed');
    // An upload answer of the other workspace's run (as a dashboard serving it would keep one):
    // neither under its own run nor under an acme run.
    const token = await saveUploadAnswer(d.h.runtime.redis, d.h.config.prefix, {
      runId: otherRun,
      retried: 1,
      ignored: [{ row: 9, line: 10, reason: 'globex-only-detail' }],
      ignoredCount: 1,
    });
    for (const run of [otherRun, acmeRun]) {
      for (const headers of [json, { cookie }]) {
        const res = await d.ask({ path: `/runs/${run}/uploads/${token}`, headers });
        expect(res.status, run).toBe(404);
        expect(res.text).not.toContain('globex-only-detail');
      }
    }
    // The runs search: a whole id is one lookup, a word a scan; neither finds the other's run.
    for (const q of [otherRun, 'seeded']) {
      const found = (await d.ask({ path: `/?q=${q}`, headers: json })).json<{ runs: Array<{ id: string }> }>();
      expect(
        found.runs.map((r) => r.id),
        q,
      ).not.toContain(otherRun);
      expect((await d.ask({ path: `/?q=${q}`, headers: { cookie } })).text, q).not.toContain(`/runs/${otherRun}`);
    }
    expect((await d.ask({ path: `/?q=${otherRun}`, headers: json })).json()).toEqual({ total: 0, runs: [] });
    expect(
      (await d.ask({ path: '/?q=seeded', headers: json }))
        .json<{ runs: Array<{ id: string }> }>()
        .runs.map((r) => r.id),
    ).toContain(acmeRun);

    const list = (await d.ask({ path: '/', headers: json })).json<{ runs: Array<{ id: string }>; total: number }>();
    expect(list.runs.map((r) => r.id)).toContain(acmeRun);
    expect(list.runs.map((r) => r.id)).not.toContain(otherRun);
    expect((await d.ask({ path: '/?workspace=globex', headers: json })).json()).toEqual({ total: 0, runs: [] });
    expect((await d.ask({ path: '/', headers: { cookie } })).text).not.toContain(otherRun);
    expect(
      (
        await d.ask({
          method: 'POST',
          path: '/workspaces/globex/pause',
          headers: { ...json, origin: d.origin, 'content-type': 'application/x-www-form-urlencoded' },
          body: form({ _csrf }),
        })
      ).status,
    ).toBe(404);

    const queues = (await d.ask({ path: '/queues/api/queues', headers: bearer })).json<{
      queues: Array<{ name: string }>;
    }>();
    expect(queues.queues.map((q) => q.name)).toEqual([queueName('acme')]);
    expect(
      (await d.ask({ path: `/queues/api/queues/${encodeURIComponent(queueName('globex'))}/workers`, headers: bearer }))
        .status,
    ).toBe(404);
  });

  it("-w acme: /metrics counts only acme's runs and rows, and exports only acme's worker counters", async () => {
    const recorder = new MetricsRecorder({ redis: d.h.runtime.redis, prefix: d.h.config.prefix });
    recorder.inc(METRIC.rateLimited, { workspace: 'acme' }, 3);
    recorder.inc(METRIC.rateLimited, { workspace: 'globex' }, 5);
    recorder.inc(METRIC.rows, { workspace: 'globex', operation: 'deal.update', status: 'failed' }, 7);
    await recorder.close();
    // A scrape reuses a snapshot for up to a second: poll until the new counters show.
    let text = '';
    for (let i = 0; i < 30 && !text.includes('crm_sync_rate_limited_total{workspace="acme"}'); i++) {
      text = (await d.ask({ path: '/metrics', headers: bearer })).text;
      if (!text.includes('crm_sync_rate_limited_total{workspace="acme"}')) await new Promise((r) => setTimeout(r, 100));
    }
    expect(text).toContain('crm_sync_rate_limited_total{workspace="acme"} 3');
    expect(text).not.toContain('globex');
    // Rows and runs are acme's alone (globex's run has 2 failed rows, acme's 3).
    const acme = (await d.h.runtime.store.listRuns({ workspace: 'acme', limit: 1000 })).runs;
    const failed = acme.filter((r) => r.operation === 'deal.update').reduce((sum, r) => sum + r.counts.failed, 0);
    expect(text).toContain(`crm_sync_rows{operation="deal.update",status="failed"} ${failed}`);
    const runs = [...text.matchAll(/^crm_sync_runs\{status="[a-z]+"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
    expect(runs).toBe(acme.length);
    expect(runs).toBeLessThan((await d.h.runtime.store.listRuns({ limit: 0 })).total);
  });

  it('Resume acts only on a blocked run: a paused workspace stays paused (409)', async () => {
    const queue = d.h.runtime.queue('acme');
    await queue.pause();
    try {
      const res = await d.postForm(`/runs/${acmeRun}/resume`, cookie, {}, { accept: 'application/json' });
      expect(res.status).toBe(409);
      expect(res.json<{ message: string }>().message).toMatch(
        /not blocked: there is nothing to resume.*Workspaces page/,
      );
      expect(await queue.isPaused()).toBe(true);
    } finally {
      await queue.resume();
    }
  });

  it('malformed multipart is a 400 with a plain message, never a 500', async () => {
    const _csrf = await d.formToken(cookie);
    const good = multipartBody({ _csrf }, { name: 'f.csv', content: 'crm_sync_row,name\n1,x\n' });
    const cases: Array<[string, string, Buffer]> = [
      ['no boundary', 'multipart/form-data', good.body],
      ['cut off mid-part', good.type, good.body.subarray(0, good.body.length - 40)],
      ['garbage', good.type, Buffer.from('this is not multipart at all')],
      ['wrong boundary', 'multipart/form-data; boundary=nope', good.body],
    ];
    for (const [name, type, body] of cases) {
      const res = await d.ask({
        method: 'POST',
        path: `/runs/${acmeRun}/upload`,
        headers: { cookie, origin: d.origin, accept: 'application/json', 'content-type': type },
        body,
      });
      expect(res.status, name).toBe(400);
      expect(res.json<{ message: string }>().message, name).not.toMatch(/Something went wrong/);
    }
    expect((await d.h.runtime.store.requireRun(acmeRun)).status).toBe('completed');
  });

  it('a binary or unreadable upload is refused without naming a server path', async () => {
    const _csrf = await d.formToken(cookie);
    const png = Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]),
      Buffer.alloc(2000, 0xff),
    ]);
    const late = Buffer.concat([
      Buffer.from(`crm_sync_row,name\n${'1,ok\n'.repeat(20_000)}`),
      Buffer.from([0xc3, 0x28, 0x0a]),
    ]);
    for (const [name, content] of [
      ['png', png],
      ['bad bytes after 64 KB', late],
      ['no crm_sync_row', Buffer.from('a,b\n1,2\n')],
    ] as const) {
      const upload = multipartBody({ _csrf }, { name: 'corrected.csv', content });
      for (const accept of ['application/json', 'text/html']) {
        const res = await d.ask({
          method: 'POST',
          path: `/runs/${acmeRun}/upload`,
          headers: { cookie, origin: d.origin, accept, 'content-type': upload.type },
          body: upload.body,
        });
        expect(res.status, name).toBeGreaterThanOrEqual(400);
        expect(res.status, name).toBeLessThan(500);
        expect(res.text, name).not.toMatch(/\/tmp|crm-sync-upload|corrected\.csv/);
        expect(res.text, name).toMatch(/uploaded file/);
      }
    }
    // Refused before the retry began: the run was not touched.
    expect(await d.h.runtime.store.requireRun(acmeRun)).toMatchObject({
      status: 'completed',
      counts: { failed: 3, queued: 0 },
    });
  });
});

describe('secrets', () => {
  it('no answer this file got (any method) and no dashboard log line carries the API key, the token or the cookie secret', () => {
    expect(secretLeaks()).toEqual([]);
  });
});
