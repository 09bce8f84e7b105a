import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPORT_META_COLUMNS } from '../../src/runs/index.js';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { multipartBody, seedFailedRun, startLiveDashboard, secretLeaks, type LiveDashboard } from './live-dashboard.js';

/**
 * Finding: every ignored line of a corrected upload was kept and answered whole (a 20 MB file of
 * ignored lines took the dashboard to 2.4–2.9 GB and answered 512 MB of JSON). Memory figures
 * are in bench/dashboard-upload.ts; here, the answer and the count.
 */
let h: Harness;
let d: LiveDashboard;
let cookie: string;
let runId: string;

beforeAll(async () => {
  h = await startHarness({ records: 3 });
  runId = await seedFailedRun(h.runtime.store, 3);
  d = await startLiveDashboard({ harness: h, dashboard: { concurrency: { upload: { running: 1, waiting: 0 } } } });
  cookie = await d.signIn();
});
afterAll(async () => {
  await d?.close();
  await h?.close();
});

const ignoredFile = (lines: number) => `crm_sync_row,x\n${'x,1\n'.repeat(lines)}`;

async function upload(content: string, accept = 'application/json') {
  const _csrf = await d.formToken(cookie);
  const { body, type } = multipartBody({ _csrf }, { name: 'corrected.csv', content });
  return d.ask({
    method: 'POST',
    path: `/runs/${runId}/upload`,
    headers: { cookie, origin: d.origin, accept, 'content-type': type },
    body,
  });
}

describe('uploads are bounded', () => {
  it('a file of 1,000,000 ignored lines: every line counted, 200 listed with their reason, a small answer', async () => {
    const lines = 1_000_000;
    const res = await upload(ignoredFile(lines));
    expect(res.status).toBe(200);
    const answer = res.json<{
      ignored: Array<{ line: number; reason: string }>;
      ignoredCount: number;
      progress: { read: number };
    }>();
    expect(answer.ignoredCount).toBe(lines);
    expect(answer.ignored).toHaveLength(200);
    expect(answer.ignored[0]).toEqual({
      row: null,
      line: 2,
      reason:
        'its crm_sync_row "x" is not a row number (a whole number from 1): keep the row numbers "runs export" wrote',
    });
    expect(answer.progress.read).toBe(0);
    expect(res.body.length).toBeLessThan(64 * 1024);

    // A browser's upload is answered with a redirect to its answer page (POST-redirect-GET).
    const posted = await upload(ignoredFile(5000), 'text/html');
    expect(posted.status).toBe(303);
    const page = await d.ask({ path: String(posted.headers.location), headers: { cookie } });
    expect(page.status).toBe(200);
    expect(page.text).toContain('5,000 lines were ignored');
    expect(page.text).toContain('… and 4,800 more (only the first 200 are listed).');
    expect(page.body.length).toBeLessThan(64 * 1024);
    expect(await h.runtime.store.requireRun(runId)).toMatchObject({
      status: 'completed',
      counts: { failed: 3, queued: 0 },
    });
  }, 60_000);

  it('counts lines of another run, unknown rows and unreadable lines the same way', async () => {
    const other = '20990101-000000-000-000zzzzz';
    const content = `crm_sync_run_id,crm_sync_row,name\n${other},1,a\n${runId},999,b\n${runId},2,"unclosed\n`;
    const res = await upload(content);
    expect(res.status).toBe(200);
    const answer = res.json<{ ignored: Array<{ reason: string }>; ignoredCount: number }>();
    expect(answer.ignoredCount).toBe(answer.ignored.length);
    expect(answer.ignored.map((i) => i.reason).join('\n')).toMatch(new RegExp(`belongs to run ${other}`));
    expect(answer.ignored.map((i) => i.reason).join('\n')).toMatch(
      /not a failed, invalid or uncertain row of this run/,
    );
  });

  it('uploads are served a few at a time: one more is told to come back (503, Retry-After)', async () => {
    const big = ignoredFile(1_500_000);
    const [a, b] = await Promise.all([upload(big), upload(big)]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([200, 503]);
    const busy = a.status === 503 ? a : b;
    expect(busy.headers['retry-after']).toBe('2');
    expect(busy.json<{ error: string }>().error).toBe('DASHBOARD_BUSY');
  }, 60_000);
});

describe('upload answers name their real cause (issue 31)', () => {
  /** A multipart body with these parts, as a client may send it. */
  function parts(list: Array<{ name: string; value: string | Buffer; filename?: string }>) {
    const boundary = `----crmsync${Math.random().toString(16).slice(2)}`;
    const chunks: Buffer[] = [];
    for (const p of list) {
      const disposition = `form-data; name="${p.name}"${p.filename ? `; filename="${p.filename}"` : ''}`;
      const type = p.filename ? '\r\nContent-Type: text/csv' : '';
      chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`));
      chunks.push(Buffer.isBuffer(p.value) ? p.value : Buffer.from(p.value), Buffer.from('\r\n'));
    }
    chunks.push(Buffer.from(`--${boundary}--\r\n`));
    return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` };
  }
  async function send(upload: { body: Buffer; type: string }) {
    const res = await d.ask({
      method: 'POST',
      path: `/runs/${runId}/upload`,
      headers: { cookie, origin: d.origin, accept: 'application/json', 'content-type': upload.type },
      body: upload.body,
    });
    return { status: res.status, message: res.json<{ message: string }>().message };
  }
  const exportLines = 'crm_sync_row,name\n1,a\n';

  it('a bad row number says the row number is bad, not that the column is missing', async () => {
    const res = await upload('crm_sync_row,name\nabc,a\n0,b\n,c\n');
    expect(res.status).toBe(200);
    const reasons = res.json<{ ignored: Array<{ line: number; reason: string }> }>().ignored;
    expect(reasons).toEqual([
      { row: null, line: 2, reason: expect.stringMatching(/^its crm_sync_row "abc" is not a row number/) },
      { row: null, line: 3, reason: expect.stringMatching(/^its crm_sync_row "0" is not a row number/) },
      { row: null, line: 4, reason: expect.stringMatching(/^its crm_sync_row cell is empty/) },
    ]);
    expect(reasons.map((r) => r.reason).join('\n')).not.toContain('no crm_sync_row column');
  });

  it('two files, or more fields than the form has, are not called "larger than 50 MB"', async () => {
    const _csrf = await d.formToken(cookie);
    const twoFiles = await send(
      parts([
        { name: '_csrf', value: _csrf },
        { name: 'file', value: exportLines, filename: 'a.csv' },
        { name: 'file', value: exportLines, filename: 'b.csv' },
      ]),
    );
    expect(twoFiles.status).toBe(400);
    expect(twoFiles.message).toContain('more than one file');
    const manyFields = await send(
      parts([
        { name: '_csrf', value: _csrf },
        ...Array.from({ length: 40 }, (_, i) => ({ name: `f${i}`, value: 'x' })),
        { name: 'file', value: exportLines, filename: 'a.csv' },
      ]),
    );
    expect(manyFields.status).toBe(400);
    expect(manyFields.message).toContain('more form fields than the run page sends');
    for (const answer of [twoFiles, manyFields]) expect(answer.message).not.toMatch(/larger than/);
  });

  it('a NUL byte is called a NUL byte (or UTF-16 text), not "not UTF-8"', async () => {
    const _csrf = await d.formToken(cookie);
    const nul = await send(
      parts([
        { name: '_csrf', value: _csrf },
        { name: 'file', value: Buffer.from('crm_sync_row,name\n1,a\u0000b\n'), filename: 'nul.csv' },
      ]),
    );
    expect(nul.status).toBe(400);
    expect(nul.message).toContain('holds a NUL byte (byte 22)');
    expect(nul.message).not.toContain('not a UTF-8');
    const utf16 = await send(
      parts([
        { name: '_csrf', value: _csrf },
        {
          name: 'file',
          value: Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('crm_sync_row,name\n', 'utf16le')]),
          filename: 'unicode.csv',
        },
      ]),
    );
    expect(utf16.message).toContain('is UTF-16 text, not UTF-8: save it as CSV UTF-8');
    expect(await h.runtime.store.requireRun(runId)).toMatchObject({ status: 'completed', counts: { queued: 0 } });
  });
});

describe('download → upload → download (finding: formula-like headers were lost)', () => {
  it('a failed-rows CSV uploaded unchanged exports again with identical headers and values', async () => {
    await h.startWorkers();
    const columns = ['id', 'name', '@cmd', '+1+1', '=HYPERLINK("http://evil.example","x")', '-note'];
    const store = h.runtime.store;
    // The formula-like columns map to no field: the run skipped them on purpose (issue 11).
    const run = await store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: 'formulas.csv',
      columns,
      options: { ignoreUnknownColumns: true },
    });
    await store.addQueued(run.id, 2);
    const at = new Date().toISOString();
    const original = (row: number) => ({
      id: `no-such-deal-${row}`,
      name: '=1+1',
      '@cmd': '@SUM(A1)',
      '+1+1': '+1',
      '=HYPERLINK("http://evil.example","x")': '=cmd|"/c calc"!A0',
      '-note': '-5',
    });
    await store.recordResults(
      run.id,
      [1, 2].map((row) => ({
        row,
        line: row + 1,
        status: 'failed' as const,
        code: 'CRM_NOT_FOUND' as const,
        httpStatus: 404,
        message: 'not found',
        original: original(row),
        at,
      })),
    );
    await store.finishProducing(run.id);

    const first = await d.ask({ path: `/runs/${run.id}/results.csv?failed=1`, headers: { cookie } });
    const header = first.text.split('\n', 1)[0]!;
    expect(header).toContain(`'@cmd,'+1+1,"'=HYPERLINK(""http://evil.example"",""x"")",'-note`);
    const _csrf = await d.formToken(cookie);
    const { body, type } = multipartBody({ _csrf }, { name: 'failed.csv', content: first.body });
    const res = await d.ask({
      method: 'POST',
      path: `/runs/${run.id}/upload`,
      headers: { cookie, origin: d.origin, accept: 'application/json', 'content-type': type },
      body,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.json()).toMatchObject({ progress: { read: 2 }, ignoredCount: 0 });
    // The CRM does not know the deals: the rows fail again, now with the CRM's own 404.
    const again = await h.waitForRun(run.id);
    expect(again.counts).toMatchObject({ failed: 2, queued: 0 });

    const second = await d.ask({ path: `/runs/${run.id}/results.csv?failed=1`, headers: { cookie } });
    expect(second.text.split('\n', 1)[0]).toBe(header);
    const values = (text: string) =>
      (parse(text, { columns: true }) as Array<Record<string, string>>).map((r) =>
        Object.fromEntries(Object.entries(r).filter(([k]) => !(EXPORT_META_COLUMNS as readonly string[]).includes(k))),
      );
    expect(values(second.text)).toEqual(values(first.text));
    expect((await store.problems(run.id)).rows.map((r) => r.original)).toEqual([original(1), original(2)]);
  });
});

describe('secrets', () => {
  it('no answer this file got (any method) and no dashboard log line carries the API key, the token or the cookie secret', () => {
    expect(secretLeaks()).toEqual([]);
  });
});
