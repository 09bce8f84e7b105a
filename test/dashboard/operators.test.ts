import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { html, jsonBlock } from '../../src/dashboard/html.js';
import { runSeriesKey } from '../../src/keys/index.js';
import { RUN_SERIES_MAX_BUCKETS, RUN_SERIES_TTL_SECONDS } from '../../src/metrics/index.js';
import { durationWords, type ProblemGroups } from '../../src/runs/index.js';
import { csv } from '../helpers/pipeline.js';
import {
  csrfOf,
  form,
  HOST,
  ORIGIN,
  signIn,
  startDashboardHarness,
  TOKEN,
  type DashboardHarness,
} from './dashboard-fixture.js';

/*
 * The operator features of issue 14, black-box through app.inject against real Redis, real
 * workers and the CRM simulator: error groups, result filters, run search, retry rules, the
 * dry-run label, durations (active, wall, passes), the activity series and the cancel route.
 */

let d: DashboardHarness;
/** 60 rows: 40 invalid for one cause, 12 refused by the CRM for one cause (each its own stage id), 8 good. */
let mixedRun: string;

beforeAll(async () => {
  d = await startDashboardHarness({ records: 80, retry: { attempts: 1, backoffMs: 10 } });
  await d.h.startWorkers();
  const stage = d.h.ws.stages[0]!.id;
  const deals = [...d.h.ws.deals.values()].slice(0, 60);
  const rows = deals.map((deal, i) => {
    if (i < 40) return [deal.id, deal.name, `about ${i} thousand`, stage]; // invalid: value is not a number
    if (i < 52) return [deal.id, deal.name, String(100 + i), `stg_gone_${i}`]; // the CRM answers 422
    return [deal.id, deal.name, String(100 + i), stage];
  });
  const file = d.h.file('mixed-causes.csv', csv(['id', 'name', 'value', 'stage_id'], rows));
  const run = await d.h.waitForRun((await d.h.importFile(file, 'deal.update')).id);
  expect(run.counts).toMatchObject({ total: 60, invalid: 40, failed: 12, succeeded: 8 });
  mixedRun = run.id;
}, 60_000);

afterAll(async () => {
  await d?.close();
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

async function groupsOf(runId: string): Promise<ProblemGroups> {
  const res = await d.get(`/runs/${runId}`, { ...d.bearer, accept: 'application/json' });
  expect(res.statusCode).toBe(200);
  return (res.json() as { groups: ProblemGroups }).groups;
}

describe('error groups', () => {
  it('shows each cause once with its count, largest first, values masked', async () => {
    const grouped = await groupsOf(mixedRun);
    expect(grouped.complete).toBe(true);
    expect(grouped.groups.map((g) => [g.status, g.count])).toEqual([
      ['invalid', 40],
      ['failed', 12],
    ]);
    expect(grouped.groups[1]!.message).not.toMatch(/stg_gone_\d/);
    const page = (await d.get(`/runs/${mixedRun}`)).body;
    expect(page).toContain('Errors by cause');
    const lines = page.match(/<tr data-group="[0-9a-f]{12}">/g) ?? [];
    expect(lines).toHaveLength(2);
    // Invalid rows are never offered a retry of their own: they need a correction.
    expect(page).toContain('Correct the file first');
    expect(page).toContain('Retry 12 failed rows</button>');
    expect(page).not.toContain('Retry 40 invalid rows</button>');
  });

  it('opens a group as a filter of the rows table and downloads only its rows', async () => {
    const failedGroup = (await groupsOf(mixedRun)).groups.find((g) => g.status === 'failed')!;
    const shown = await d.get(`/runs/${mixedRun}?group=${failedGroup.key}`, {
      ...d.bearer,
      accept: 'application/json',
    });
    const rows = (shown.json() as { problems: { rows: Array<{ row: number; status: string }> } }).problems.rows;
    expect(rows.map((r) => r.row)).toEqual([41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52]);
    const download = await d.get(`/runs/${mixedRun}/results.csv?group=${failedGroup.key}`);
    expect(download.headers['content-disposition']).toContain(`group-${failedGroup.key}`);
    const records = parse(download.body, { columns: true }) as Array<Record<string, string>>;
    expect(records.map((r) => r.crm_sync_result)).toEqual(Array(12).fill('failed'));
    expect(records[0]!.stage_id).toBe('stg_gone_40');
  });

  it('filters rows by result, and ignores a malformed filter', async () => {
    const invalid = await d.get(`/runs/${mixedRun}?result=invalid`, { ...d.bearer, accept: 'application/json' });
    const rows = (invalid.json() as { problems: { rows: Array<{ status: string }> } }).problems.rows;
    expect(rows).toHaveLength(40);
    expect(new Set(rows.map((r) => r.status))).toEqual(new Set(['invalid']));
    const page = (await d.get(`/runs/${mixedRun}?result=failed&q=stage`)).body;
    expect(page).toContain('<option value="failed" selected>');
    expect((await d.get(`/runs/${mixedRun}?result=bogus&group=<script>`)).statusCode).toBe(200);
  });
});

describe('retry rules', () => {
  it('"Retry all" sends failed rows only and says why invalid rows stay', async () => {
    const page = (await d.get(`/runs/${mixedRun}`)).body;
    expect(page).toContain('Retry 12 failed rows');
    expect(page).toContain('40 invalid rows are not retried');
    const res = await d.post(`/runs/${mixedRun}/retry`, { scope: 'failed' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/runs/${mixedRun}?done=retry&n=12`);
    const after = await d.h.waitForRun(mixedRun);
    // The stages are still unknown: the 12 fail again; the invalid rows were not touched.
    expect(after.counts).toMatchObject({ invalid: 40, failed: 12, succeeded: 8 });
    expect(after.firstFinishedAt).toBeDefined();
    expect(Date.parse(after.finishedAt!)).toBeGreaterThanOrEqual(Date.parse(after.firstFinishedAt!));
  });

  it('retries one failed group, and refuses a retry that would only hold invalid rows', async () => {
    const grouped = await groupsOf(mixedRun);
    const failedGroup = grouped.groups.find((g) => g.status === 'failed')!;
    const invalidGroup = grouped.groups.find((g) => g.status === 'invalid')!;
    const res = await d.post(`/runs/${mixedRun}/retry`, { group: failedGroup.key });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/runs/${mixedRun}?done=retry&n=12`);
    await d.h.waitForRun(mixedRun);
    const refused = await d.post(`/runs/${mixedRun}/retry`, { group: invalidGroup.key });
    expect(refused.statusCode).toBe(400);
    expect(refused.body).toContain('invalid rows need a correction first');
  });

  it('says active time, wall time and passes apart when a retry finishes later, on the run page and the list', async () => {
    const deals = [...d.h.ws.deals.values()].slice(60, 62);
    d.h.ws.setFaults({ errorRate: 1 });
    const file = d.h.file(
      'later.csv',
      csv(
        ['id', 'name'],
        deals.map((deal) => [deal.id, 'Later']),
      ),
    );
    const first = await d.h.waitForRun((await d.h.importFile(file, 'deal.update')).id);
    d.h.ws.setFaults(null);
    expect(first.firstFinishedAt).toBe(first.finishedAt);
    await new Promise((r) => setTimeout(r, 1200));
    expect((await d.post(`/runs/${first.id}/retry`, { scope: 'failed' })).statusCode).toBe(303);
    const done = await d.h.waitForRun(first.id);
    expect(done.counts).toMatchObject({ succeeded: 2, failed: 0 });
    expect(done.firstFinishedAt).toBe(first.firstFinishedAt);
    expect(Date.parse(done.finishedAt!) - Date.parse(first.finishedAt!)).toBeGreaterThanOrEqual(1000);
    const words = durationWords(done);
    const m = /^active ([\d.]+) s · wall ([\d.]+) s · 2 passes \(last ([\d.]+) s\)$/.exec(words);
    expect(m, words).not.toBeNull();
    const [active, wall, last] = [Number(m![1]), Number(m![2]), Number(m![3])];
    expect(wall).toBeGreaterThanOrEqual(1.2);
    expect(active).toBeLessThan(wall);
    expect(last).toBeLessThanOrEqual(active);
    // The run store's one wording, as the CLI's summary says it too.
    const runPage = (await d.get(`/runs/${first.id}`)).body;
    expect(runPage).toMatch(new RegExp(`<span data-duration title="[^"]+">${escapeRegExp(words)}</span>`));
    const list = (await d.get(`/?q=${first.id}`)).body;
    const cell = /<td class="nowrap" data-duration title="[^"]+">([\s\S]*?)<\/td>/.exec(list)?.[1];
    expect(cell).toBe(
      `active ${m![1]} s<div class="small">wall ${m![2]} s</div><div class="small">2 passes (last ${m![3]} s)</div>`,
    );
  });
});

describe('runs list', () => {
  it('searches runs by id, file name and sync name', async () => {
    const synced = await d.h.runtime.store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: '/srv/exports/nightly-owners.csv',
      syncName: 'owners-nightly',
    });
    const byFile = (await d.get('/?q=MIXED-causes', { ...d.bearer, accept: 'application/json' })).json() as {
      runs: Array<{ id: string }>;
      total: number;
    };
    expect(byFile.runs.map((r) => r.id)).toEqual([mixedRun]);
    const bySync = (await d.get('/?q=owners-night', { ...d.bearer, accept: 'application/json' })).json() as {
      runs: Array<{ id: string }>;
    };
    expect(bySync.runs.map((r) => r.id)).toEqual([synced.id]);
    const byId = (await d.get(`/?q=${mixedRun}`, { ...d.bearer, accept: 'application/json' })).json() as {
      runs: Array<{ id: string }>;
    };
    expect(byId.runs.map((r) => r.id)).toEqual([mixedRun]);
    const byIdPart = (await d.get(`/?q=${mixedRun.slice(-8)}`, { ...d.bearer, accept: 'application/json' })).json() as {
      runs: Array<{ id: string }>;
    };
    expect(byIdPart.runs.map((r) => r.id)).toEqual([mixedRun]);
    const page = (await d.get('/?q=nothing-like-this')).body;
    expect(page).toContain('No runs match.');
    expect(page).toContain('value="nothing-like-this"');
    await d.h.runtime.store.deleteRun(synced.id);
  });

  it('labels dry runs and says why a failed run failed, on one-line badges', async () => {
    const deals = [...d.h.ws.deals.values()].slice(62, 65);
    const file = d.h.file(
      'dry.csv',
      csv(
        ['id', 'name'],
        deals.map((deal) => [deal.id, 'Dry']),
      ),
    );
    const dry = await d.h.waitForRun((await d.h.importFile(file, 'deal.update', { dryRun: true })).id);
    const failed = await d.h.runtime.store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: 'gone.csv',
    });
    await d.h.runtime.store.setStatus(failed.id, 'failed', 'the file could not be read: no such file');
    const list = (await d.get('/')).body;
    expect(list).toMatch(
      new RegExp(`${dry.id}[\\s\\S]*?<span class="badge ok" title="Dry run completed[^"]*">Dry run</span>`),
    );
    expect(list).toContain('the file could not be read: no such file');
    const runPage = (await d.get(`/runs/${dry.id}`)).body;
    expect(runPage).toContain('nothing was sent to the CRM');
    expect(runPage).toContain('Valid (not sent)');
    await d.h.runtime.store.deleteRun(failed.id);
  });
});

describe('Bull Board', () => {
  it('links back to the dashboard and names no other origin', async () => {
    const res = await d.get('/queues');
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('<a href="/" ');
    expect(res.body).not.toMatch(/(href|src)="https?:/);
    expect(res.headers['content-security-policy']).toContain("default-src 'self'");
    expect(String(res.headers['content-security-policy'])).not.toMatch(/https?:/);
  });
});

/** One chart of a page (the run's own, or its workspace's), as markup. */
function chartOf(page: string, kind: 'run' | 'workspace'): string {
  const start = page.indexOf(`data-chart="${kind}"`);
  if (start < 0) return '';
  const end = page.indexOf('data-chart=', start + 1);
  return page.slice(start, end < 0 ? undefined : end);
}

/** What a chart's JSON data block holds: the series dashboard.js draws with uPlot. */
interface ChartData {
  bucketSeconds: number;
  t: number[];
  lines: Record<string, number[]>;
}

/** A chart's data block, parsed as the browser would (the block is `<script type="application/json">`). */
function dataOf(chart: string): ChartData | undefined {
  const m = /<script type="application\/json" data-chart-data>([^<]*)<\/script>/.exec(chart);
  return m ? (JSON.parse(m[1]!) as ChartData) : undefined;
}

/** Each line's total in a chart, by its label. */
function totalsOf(chart: string): Record<string, number> {
  const data = dataOf(chart);
  if (data === undefined) return {};
  return Object.fromEntries(Object.entries(data.lines).map(([label, v]) => [label, v.reduce((a, b) => a + b, 0)]));
}

describe('activity chart', () => {
  it("draws the workspace's requests and failures from the series the workers keep", async () => {
    const page = (await d.get(`/runs/${mixedRun}`)).body;
    const chart = chartOf(page, 'workspace');
    const totals = totalsOf(chart);
    expect(totals.Requests).toBeGreaterThan(0);
    // 12 refused rows, then the two retries of them: every failure is in the series.
    expect(totals['Failed rows']).toBeGreaterThanOrEqual(12);
    // Each line has its captioned box for uPlot; the data block has a value per bucket, times in seconds.
    const data = dataOf(chart)!;
    expect(Object.keys(data.lines)).toEqual(['Requests', 'Rows done', '429 answers', 'Failed rows']);
    for (const values of Object.values(data.lines)) expect(values).toHaveLength(data.t.length);
    expect(data.bucketSeconds).toBe(10);
    expect(data.t.every((t, i) => i === 0 || t - data.t[i - 1]! === 10)).toBe(true);
    expect(chart.match(/<figure class="spark [a-z]+" data-series="[^"]+">/g)).toHaveLength(4);
    expect(chart).toMatch(/peak [\d.,]+\/s/);
  });

  it("draws the run's own series above its workspace's: this run's requests and rows alone", async () => {
    const stage = d.h.ws.stages[0]!.id;
    const deals = [...d.h.ws.deals.values()].slice(70, 75);
    const rows = deals.map((deal, i) => [deal.id, deal.name, i < 2 ? `stg_gone_${i}` : stage]);
    const file = d.h.file('own-series.csv', csv(['id', 'name', 'stage_id'], rows));
    const run = await d.h.waitForRun((await d.h.importFile(file, 'deal.update')).id);
    expect(run.counts).toMatchObject({ succeeded: 3, failed: 2 });
    // The workers flush their counters once a second: the page has them within a flush or two.
    let page = '';
    for (let i = 0; i < 40 && totalsOf(chartOf(page, 'run'))['Rows done'] !== 5; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      page = (await d.get(`/runs/${run.id}`)).body;
    }
    const own = chartOf(page, 'run');
    expect(page.indexOf('data-chart="run"')).toBeLessThan(page.indexOf('data-chart="workspace"'));
    expect(own).toContain('This run');
    const totals = totalsOf(own);
    // Requests are drawn per second of each 10-second bucket: 5 requests in all are 0.5.
    expect(totals.Requests).toBeCloseTo(0.5, 6);
    expect(totals).toMatchObject({ 'Rows done': 5, 'Failed rows': 2, '429 answers': 0 });
    // The page loads uPlot (served by the dashboard) to draw them; the captions say the numbers as text.
    expect(page).toContain('<script src="/static/uplot.min.js" defer></script>');
    expect(own).toMatch(/Rows done<\/b> <span class="muted">now [\d.]+ · peak [\d.]+ per 10 s/);
    // The workspace's chart has every run of the workspace: the mixed run's rows too.
    expect(totalsOf(chartOf(page, 'workspace'))['Rows done']).toBeGreaterThan(5);
  });

  it('serves uPlot itself, from the installed package, to anyone like its own assets, cached a while', async () => {
    const require = createRequire(import.meta.url);
    for (const [path, file, type] of [
      ['/static/uplot.min.js', 'uPlot.iife.min.js', 'text/javascript'],
      ['/static/uplot.min.css', 'uPlot.min.css', 'text/css'],
    ] as const) {
      // Without a session, as the sign-in page's assets: it is public code and holds no data.
      const res = await d.get(path, { host: HOST });
      expect(res.statusCode, path).toBe(200);
      expect(res.headers['content-type'], path).toContain(type);
      expect(res.headers['cache-control'], path).toBe('public, max-age=300');
      expect(res.body, path).toBe(readFileSync(require.resolve(`uplot/dist/${file}`), 'utf8'));
    }
    // Pages without charts do not load it.
    expect((await d.get('/')).body).not.toContain('uplot');
  });

  it('writes a data block that no value can break out of (</script>, <!--)', () => {
    const block = jsonBlock(html`data-x`, { label: '</script><script>alert(1)</script><!-- & \u2028' }).value;
    expect(block).toMatch(/^<script type="application\/json" data-x>[^<]*<\/script>$/);
    expect(block).not.toContain('<!--');
    const json = /data-x>(.*)<\/script>$/s.exec(block)![1]!;
    expect(JSON.parse(json)).toEqual({ label: '</script><script>alert(1)</script><!-- & \u2028' });
  });

  it('says so when a run has no series of its own (nothing was sent)', async () => {
    const quiet = await d.h.runtime.store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'q.csv' });
    await d.h.runtime.store.finishProducing(quiet.id);
    const chart = chartOf((await d.get(`/runs/${quiet.id}`)).body, 'run');
    expect(chart).toContain('No request was counted for this run');
    expect(dataOf(chart)).toBeUndefined();
    await d.h.runtime.store.deleteRun(quiet.id);
  });

  it('keeps the series bounded: 10-second buckets per workspace expiring within two hours, one trimmed hash per run', async () => {
    const keys = await d.h.runtime.redis.keys(`${d.h.config.prefix}:metrics:series:*`);
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(key).toMatch(/:metrics:series:\{acme\}:\d+$/);
      const ttl = await d.h.runtime.redis.ttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(7200);
      expect(
        Object.keys(await d.h.runtime.redis.hgetall(key)).every((f) =>
          ['requests', 'rateLimited', 'failed', 'succeeded'].includes(f),
        ),
      ).toBe(true);
    }
    const runKeys = await d.h.runtime.redis.keys(`${d.h.config.prefix}:metrics:run:*`);
    expect(runKeys).toContain(runSeriesKey(d.h.config.prefix, mixedRun));
    for (const key of runKeys) {
      const ttl = await d.h.runtime.redis.ttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(RUN_SERIES_TTL_SECONDS);
      const fields = await d.h.runtime.redis.hkeys(key);
      expect(fields).toContain('last');
      expect(fields.length).toBeLessThanOrEqual(RUN_SERIES_MAX_BUCKETS + 1);
    }
  });
});

describe('cancel', () => {
  it('has no button for a run that ended, and refuses to cancel it (409)', async () => {
    const ended = await d.h.runtime.store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: 'done.csv',
    });
    await d.h.runtime.store.finishProducing(ended.id);
    expect((await d.get(`/runs/${ended.id}`)).body).not.toContain('Cancel run');
    const res = await d.post(`/runs/${ended.id}/cancel`);
    expect(res.statusCode).toBe(409);
    expect(res.body).toContain('only a running or blocked run can be cancelled');
    await d.h.runtime.store.deleteRun(ended.id);
  });

  it('cancels a running run in scope after the form-token check: its waiting rows end cancelled, none is sent', async () => {
    const app = await buildDashboard({ runtime: d.h.runtime, token: new Secret(TOKEN), workspaces: ['acme'] });
    const queue = d.h.runtime.queue('acme');
    // Held in the queue (an operator's pause) so the rows are still waiting when the button is pressed.
    await queue.pause();
    try {
      const cookie = await signIn(app);
      const headers = { host: HOST, cookie };
      const deals = [...d.h.ws.deals.values()].slice(0, 7);
      const writes = d.h.ws.stats.writes.dealUpdate;
      const running = await d.h.importFile(
        d.h.file(
          'to-cancel.csv',
          csv(
            ['id', 'name'],
            deals.map((deal) => [deal.id, 'Never sent']),
          ),
        ),
        'deal.update',
      );
      const elsewhere = await d.h.runtime.store.createRun({
        workspace: 'globex',
        operation: 'deal.update',
        source: 'other.csv',
      });
      const pageBody = (await app.inject({ method: 'GET', url: `/runs/${running.id}`, headers })).body;
      expect(pageBody).toContain('Cancel run');
      const _csrf = csrfOf(pageBody);
      const post = (id: string, fields: Record<string, string>) =>
        app.inject({
          method: 'POST',
          url: `/runs/${id}/cancel`,
          headers: { ...headers, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
          payload: form(fields),
        });

      expect((await post(running.id, {})).statusCode).toBe(403);
      expect((await post(elsewhere.id, { _csrf })).statusCode).toBe(404);
      expect((await d.h.runtime.store.requireRun(running.id)).status).toBe('running');
      const done = await post(running.id, { _csrf });
      expect(done.statusCode).toBe(303);
      expect(done.headers.location).toBe(`/runs/${running.id}?done=cancel&n=7`);
      const after = (await app.inject({ method: 'GET', url: String(done.headers.location), headers })).body;
      expect(after).toContain('Run cancelled; 7 rows will not be sent');
      expect(after).not.toContain('Cancel run</button>');
      const run = await d.h.runtime.store.requireRun(running.id);
      expect(run).toMatchObject({ status: 'cancelled', counts: { total: 7, queued: 0 } });
      expect(run.reason).toContain('cancelled from the dashboard');
      // A cancelled run is not cancelled again.
      expect((await post(running.id, { _csrf })).statusCode).toBe(409);
      await queue.resume();
      await new Promise((r) => setTimeout(r, 300));
      expect(d.h.ws.stats.writes.dealUpdate).toBe(writes);
      await d.h.runtime.store.deleteRun(elsewhere.id);
    } finally {
      await queue.resume();
      await app.close();
    }
  });
});
