import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METRIC, MetricsRecorder } from '../../src/metrics/index.js';
import type { WorkerPool } from '../../src/worker/index.js';
import { csv } from '../helpers/pipeline.js';
import { HOST, ORIGIN, csrfOf, multipart, startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

let d: DashboardHarness;
let pool: WorkerPool;
/** A run whose rows 2 and 4 failed with 422 (unknown stage); row 2's name is a script tag. */
let badStageRun: string;
const XSS = '<script>alert("x")</script>';

beforeAll(async () => {
  d = await startDashboardHarness({ records: 30, retry: { attempts: 2, backoffMs: 20 } });
  pool = await d.h.startWorkers();
  const deals = [...d.h.ws.deals.values()].slice(0, 5);
  const stage = d.h.ws.stages[0]!.id;
  const rows = deals.map((deal, i) => [deal.id, `Deal ${i}`, stage]);
  rows[1] = [deals[1]!.id, XSS, 'stg_missing'];
  rows[3] = [deals[3]!.id, 'Deal 3', 'stg_missing'];
  const file = d.h.file('deals.csv', csv(['id', 'name', 'stage_id'], rows));
  const run = await d.h.waitForRun((await d.h.importFile(file, 'deal.update')).id);
  expect(run.counts).toMatchObject({ succeeded: 3, failed: 2 });
  badStageRun = run.id;
});
afterAll(async () => d?.close());

describe('pages', () => {
  it('lists runs with plain status words, newest first, and filters them', async () => {
    const page = await d.get('/');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toContain('text/html');
    expect(page.body).toContain(badStageRun);
    expect(page.body).toContain('Completed with 2 failed rows');
    expect(page.body).toContain('Update deals');
    expect((await d.get('/?status=running')).body).not.toContain(badStageRun);
    expect((await d.get('/?status=completed&workspace=acme')).body).toContain(badStageRun);
    expect((await d.get('/?sync=nightly-deals')).body).toContain('No runs match');
    const json = await d.get('/?status=completed', { ...d.bearer, accept: 'application/json' });
    expect(json.json().runs.map((r: { id: string }) => r.id)).toContain(badStageRun);
  });

  it('shows a run: counts, failed rows with line, error, HTTP status and values, HTML-escaped', async () => {
    const page = await d.get(`/runs/${badStageRun}`);
    expect(page.statusCode).toBe(200);
    // The rows table is titled by the problem kinds the run has: here failed rows only.
    expect(page.body).toContain('<h2 id="problems">Failed rows</h2>');
    expect(page.body).toContain('value="2"'); // row checkbox
    expect(page.body).toContain('422');
    expect(page.body).toContain('stg_missing');
    expect(page.body).not.toContain(XSS);
    expect(page.body).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
  });

  it('filters failed rows by error text and pages them', async () => {
    const none = await d.get(`/runs/${badStageRun}?q=no-such-error-text`);
    expect(none.body).toContain('No failed or invalid row matches');
    const json = await d.get(`/runs/${badStageRun}?page=2`, { ...d.bearer, accept: 'application/json' });
    expect(json.json().problems.total).toBe(2);
    expect(json.json().problems.rows).toEqual([]);
  });

  it('shows superseded rows and uncertain creates on the run page, the run list and in the export', async () => {
    const store = d.h.runtime.store;
    const run = await store.createRun({
      workspace: 'acme',
      operation: 'deal.create',
      source: 'kinds.csv',
      columns: ['name'],
    });
    await store.addQueued(run.id, 3);
    const at = new Date().toISOString();
    await store.recordResults(run.id, [
      { row: 1, line: 2, status: 'succeeded', recordId: 'd1', at },
      {
        row: 2,
        line: 3,
        status: 'superseded',
        code: 'ROW_SUPERSEDED',
        message: 'not sent: row 9 of run x wrote this record later',
        at,
      },
      {
        row: 3,
        line: 4,
        status: 'uncertain',
        code: 'CREATE_UNCERTAIN',
        message: 'may have been created: 2 unclaimed deals match it',
        original: { name: 'Maybe' },
        at,
      },
    ]);
    await store.finishProducing(run.id);
    expect((await d.get('/')).body).toContain('Completed with 1 uncertain create');
    const page = (await d.get(`/runs/${run.id}`)).body;
    expect(page).toContain('Superseded');
    expect(page).toContain('Uncertain');
    expect(page).toContain('may have been created: 2 unclaimed deals match it');
    const exported = parse((await d.get(`/runs/${run.id}/results.csv`)).body, { columns: true }) as Array<
      Record<string, string>
    >;
    expect(exported.map((r) => r.crm_sync_result)).toEqual(['succeeded', 'superseded', 'uncertain']);
    const problems = parse((await d.get(`/runs/${run.id}/results.csv?failed=1`)).body, { columns: true }) as Array<
      Record<string, string>
    >;
    expect(problems.map((r) => [r.crm_sync_row, r.crm_sync_result, r.name])).toEqual([['3', 'uncertain', 'Maybe']]);
  });

  it('answers 404 for an unknown run', async () => {
    const res = await d.get('/runs/no-such-run');
    expect(res.statusCode).toBe(404);
    expect(res.body).toContain('That did not work');
  });

  it('never renders the workspace API key', async () => {
    for (const url of [
      '/',
      `/runs/${badStageRun}`,
      '/workspaces',
      '/metrics',
      '/queues',
      '/queues/api/queues',
      '/login',
    ]) {
      const res = await d.get(url);
      expect(res.statusCode, url).toBeLessThan(400);
      expect(res.body, url).not.toContain(d.h.apiKey);
    }
  });

  it('mounts Bull Board at /queues with the workspace queue', async () => {
    const ui = await d.get('/queues');
    expect(ui.statusCode).toBe(200);
    const api = await d.get('/queues/api/queues', d.bearer);
    expect(api.statusCode).toBe(200);
    expect(JSON.stringify(api.json())).toContain('acme');
  });

  it('Bull Board is read-only: cleaning or removing queued jobs is refused and the job stays', async () => {
    const queue = d.h.runtime.queue('acme');
    // Delayed an hour, so the running workers leave it alone while the test pokes at it.
    const job = await queue.add(
      'contact.update',
      {
        runId: 'bull-board-probe',
        row: 1,
        line: 2,
        payload: { op: 'contact.update', id: 'x', body: {} },
        original: {},
      } as never,
      {
        jobId: 'bull-board-probe',
        delay: 3_600_000,
      },
    );
    try {
      const listed = (await d.get('/queues/api/queues', d.bearer)).json() as {
        queues: Array<{ name: string; readOnlyMode: boolean }>;
      };
      const name = listed.queues.find((q) => q.name.includes('acme'))?.name;
      expect(name).toBeDefined();
      expect(listed.queues.every((q) => q.readOnlyMode)).toBe(true);
      const put = (url: string) => d.app.inject({ method: 'PUT', url, headers: { ...d.bearer, origin: ORIGIN } });
      for (const url of [
        `/queues/api/queues/${name}/clean/delayed`,
        `/queues/api/queues/${name}/bull-board-probe/clean`,
        `/queues/api/queues/${name}/empty`,
      ]) {
        const res = await put(url);
        expect(res.statusCode, url).toBe(405);
      }
      expect(await queue.getJobState(job.id!)).toBe('delayed');
    } finally {
      await queue.remove('bull-board-probe');
    }
  });
});

describe('downloads', () => {
  it('streams all results or only the failed rows as a CSV attachment', async () => {
    const all = await d.get(`/runs/${badStageRun}/results.csv`);
    expect(all.statusCode).toBe(200);
    expect(all.headers['content-disposition']).toBe(`attachment; filename="${badStageRun}-results.csv"`);
    expect(all.headers['content-type']).toContain('text/csv');
    expect(parse(all.body, { columns: true })).toHaveLength(5);

    const failed = await d.get(`/runs/${badStageRun}/results.csv?failed=1`);
    expect(failed.headers['content-disposition']).toContain('-failed.csv');
    const records = parse(failed.body, { columns: true }) as Array<Record<string, string>>;
    expect(records.map((r) => [r.crm_sync_row, r.crm_sync_result, r.crm_sync_http_status, r.stage_id])).toEqual([
      ['2', 'failed', '422', 'stg_missing'],
      ['4', 'failed', '422', 'stg_missing'],
    ]);
    expect(records[0]!.name).toBe(XSS);
  });
});

describe('retries', () => {
  it('retries a corrected CSV upload and lists the lines it ignored', async () => {
    const failed = parse((await d.get(`/runs/${badStageRun}/results.csv?failed=1`)).body, { columns: true }) as Array<
      Record<string, string>
    >;
    const header = Object.keys(failed[0]!);
    const fixed = failed.map((r) =>
      header.map((k) => (k === 'stage_id' ? d.h.ws.stages[0]!.id : k === 'name' ? 'Fixed name' : r[k]!)),
    );
    fixed.push(header.map((k) => (k === 'crm_sync_row' ? '1' : k === 'crm_sync_run_id' ? badStageRun : 'x')));
    const _csrf = csrfOf((await d.get(`/runs/${badStageRun}`)).body);
    const { body, contentType } = multipart(
      { _csrf },
      { field: 'file', name: 'fixed.csv', content: csv(header, fixed) },
    );

    const noToken = multipart({}, { field: 'file', name: 'fixed.csv', content: csv(header, fixed) });
    const refused = await d.app.inject({
      method: 'POST',
      url: `/runs/${badStageRun}/upload`,
      headers: { ...d.browser, origin: ORIGIN, 'content-type': noToken.contentType },
      payload: noToken.body,
    });
    expect(refused.statusCode).toBe(403);

    const posted = await d.app.inject({
      method: 'POST',
      url: `/runs/${badStageRun}/upload`,
      headers: { ...d.browser, origin: ORIGIN, 'content-type': contentType },
      payload: body,
    });
    // POST-redirect-GET: the answer is a page of its own, so a reload shows it again, never re-sends the file.
    expect(posted.statusCode).toBe(303);
    const location = String(posted.headers.location);
    expect(location).toMatch(new RegExp(`^/runs/${badStageRun}/uploads/[A-Za-z0-9_-]{22}$`));
    const res = await d.get(location);
    expect(res.statusCode).toBe(200);
    expect((await d.get(location)).body).toBe(res.body);
    expect((await d.get(`/runs/${badStageRun}/uploads/AAAAAAAAAAAAAAAAAAAAAA`)).statusCode).toBe(404);
    expect(res.body).toContain('2 rows sent again');
    expect(res.body).toContain('1 line was ignored');
    expect(res.body).toContain('not a failed, invalid or uncertain row of this run');
    const done = await d.h.waitForRun(badStageRun);
    expect(done).toMatchObject({ status: 'completed', counts: { succeeded: 5, failed: 0, invalid: 0 } });
    const page = await d.get(`/runs/${badStageRun}`);
    expect(page.body).toContain('>Completed<');
    expect(page.body).toContain('No failed or invalid rows');
  });

  it('retries selected rows, then all failed rows, once the cause is gone', async () => {
    const deals = [...d.h.ws.deals.values()].slice(10, 14);
    d.h.ws.setFaults({ errorRate: 1 });
    const file = d.h.file(
      'flaky.csv',
      csv(
        ['id', 'name'],
        deals.map((deal) => [deal.id, 'After fault']),
      ),
    );
    const { id } = await d.h.importFile(file, 'deal.update');
    expect((await d.h.waitForRun(id)).counts.failed).toBe(4);
    d.h.ws.setFaults(null);

    const selected = await d.post(`/runs/${id}/retry`, { row: ['1', '3'] });
    expect(selected.statusCode).toBe(303);
    expect(selected.headers.location).toBe(`/runs/${id}?done=retry&n=2`);
    const partly = await d.h.waitForRun(id);
    expect(partly.counts).toMatchObject({ succeeded: 2, failed: 2 });
    const problems = await d.get(`/runs/${id}`, { ...d.bearer, accept: 'application/json' });
    expect(problems.json().problems.rows.map((r: { row: number }) => r.row)).toEqual([2, 4]);
    expect((await d.get(`/runs/${id}?done=retry&n=2`)).body).toContain('2 rows sent again');

    const all = await d.post(`/runs/${id}/retry`);
    expect(all.statusCode).toBe(303);
    expect((await d.h.waitForRun(id)).counts).toMatchObject({ succeeded: 4, failed: 0 });
  });

  it('refuses a selection with no rows or a bad row number', async () => {
    const res = await d.post(`/runs/${badStageRun}/retry`, { row: 'abc' });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('not a row number');
  });
});

describe('workspaces and blocked runs', () => {
  it('pauses and resumes a workspace queue and shows its state', async () => {
    expect((await d.post('/workspaces/acme/pause')).statusCode).toBe(303);
    expect(await d.h.runtime.queue('acme').isPaused()).toBe(true);
    expect((await d.get('/workspaces')).body).toContain('>Paused<');
    expect((await d.post('/workspaces/acme/resume')).statusCode).toBe(303);
    expect(await d.h.runtime.queue('acme').isPaused()).toBe(false);
    expect((await d.get('/workspaces')).body).toContain('>Active<');
    expect((await d.post('/workspaces/nope/pause')).statusCode).toBe(404);
  });

  it('says what keeps a running run waiting: the circuit breaker holding its workspace, then no worker', async () => {
    const reason = 'the CRM at http://x is unreachable (ECONNREFUSED, 5 requests in a row): workspace held';
    await d.h.runtime.store.setHold('acme', 'unreachable', reason);
    await d.h.runtime.queue('acme').pause();
    const deal = [...d.h.ws.deals.values()][25]!;
    const { id } = await d.h.importFile(d.h.file('held.csv', csv(['id', 'name'], [[deal.id, 'Held']])), 'deal.update');
    const held = await d.get(`/runs/${id}`);
    expect(held.body).toContain('is held: the CRM does not answer.');
    expect(held.body).toContain('ECONNREFUSED, 5 requests in a row');
    const workspaces = (await d.get('/workspaces')).body;
    expect(workspaces).toContain('Held — CRM unreachable');
    expect(workspaces).toMatch(/<td class="num">1<\/td>\s*<\/tr>/); // Workers, the last column

    await pool.close();
    expect((await d.get(`/runs/${id}`)).body).toContain('No worker serves workspace “acme”');
    expect((await d.get('/workspaces')).body).toContain('crm-sync worker -w acme');
    expect((await d.post('/workspaces/acme/resume')).statusCode).toBe(303);
    expect(await d.h.runtime.store.holds('acme')).toEqual({});
    pool = await d.h.startWorkers();
    expect(await d.h.waitForRun(id)).toMatchObject({ status: 'completed', counts: { succeeded: 1 } });
    const after = (await d.get(`/runs/${id}`)).body;
    expect(after).not.toContain('No worker serves');
    expect(after).not.toContain('is held');
  });

  it('explains a blocked run and resumes it once the key is fixed', async () => {
    d.h.ws.revokeApiKey(d.h.apiKey);
    const deals = [...d.h.ws.deals.values()].slice(20, 23);
    const file = d.h.file(
      'blocked.csv',
      csv(
        ['id', 'name'],
        deals.map((deal) => [deal.id, 'Unblocked']),
      ),
    );
    const { id } = await d.h.importFile(file, 'deal.update');
    await d.h.waitForRun(id, 20_000, (r) => r.status === 'blocked');
    const page = await d.get(`/runs/${id}`);
    expect(page.body).toContain('Blocked — API key refused');
    expect(page.body).toContain(`/runs/${id}/resume`);
    expect(page.body).toContain('First fix the key');
    expect((await d.get('/workspaces')).body).toContain('Paused — API key refused');

    d.h.ws.addApiKey(d.h.apiKey);
    const res = await d.post(`/runs/${id}/resume`);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/runs/${id}?done=resume&n=1`);
    expect(await d.h.waitForRun(id)).toMatchObject({ status: 'completed', counts: { succeeded: 3 } });
  });
});

describe('/metrics', () => {
  it('exposes fleet counters from Redis and gauges computed at scrape time', async () => {
    let text = '';
    // Workers flush their counters to Redis once a second.
    for (let i = 0; i < 40 && !text.includes('crm_sync_requests_total{'); i++) {
      text = (await d.get('/metrics', d.bearer)).body;
      if (!text.includes('crm_sync_requests_total{')) await new Promise((r) => setTimeout(r, 250));
    }
    expect(text).toMatch(/crm_sync_requests_total\{workspace="acme",operation="deal.update",status="2xx"\} [1-9]/);
    expect(text).toMatch(/crm_sync_requests_total\{[^}]*status="422"\} [1-9]/);
    expect(text).toMatch(/crm_sync_rows\{operation="deal.update",status="succeeded"\} [1-9]/);
    expect(text).toMatch(/crm_sync_runs\{status="completed"\} [1-9]/);
    expect(text).toMatch(/crm_sync_queue_jobs\{workspace="acme",state="waiting"\} 0/);
    expect(text).toContain('crm_sync_queue_paused{workspace="acme"} 0');
    expect(text).toMatch(/crm_sync_run_duration_seconds_count\{operation="deal.update"\} [1-9]/);
    expect(text).not.toContain(d.h.apiKey);
  });

  it('exposes the 429 and retry counters workers record', async () => {
    const recorder = new MetricsRecorder({ redis: d.h.runtime.redis, prefix: d.h.config.prefix });
    recorder.inc(METRIC.rateLimited, { workspace: 'metrics-probe' }, 3);
    recorder.inc(METRIC.retries, { workspace: 'metrics-probe', operation: 'deal.update' }, 2);
    await recorder.close();
    // A scrape reuses a snapshot for up to a second: poll until the new counters show.
    let text = '';
    for (let i = 0; i < 30 && !text.includes('metrics-probe'); i++) {
      text = (await d.get('/metrics', d.bearer)).body;
      if (!text.includes('metrics-probe')) await new Promise((r) => setTimeout(r, 100));
    }
    expect(text).toContain('crm_sync_rate_limited_total{workspace="metrics-probe"} 3');
    expect(text).toContain('crm_sync_retries_total{workspace="metrics-probe",operation="deal.update"} 2');
  });
});

describe('host header', () => {
  it('uses the request host for the same-origin check', async () => {
    const _csrf = csrfOf((await d.get('/workspaces')).body);
    const res = await d.app.inject({
      method: 'POST',
      url: '/workspaces/acme/pause',
      headers: {
        ...d.browser,
        host: `${HOST}:8080`,
        origin: ORIGIN,
        'content-type': 'application/x-www-form-urlencoded',
      },
      payload: `_csrf=${encodeURIComponent(_csrf)}`,
    });
    expect(res.statusCode).toBe(403);
  });
});
