import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { ORIGIN, csrfOf, multipart, startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

let d: DashboardHarness;
beforeAll(async () => {
  d = await startDashboardHarness({ records: 10, retry: { attempts: 1, backoffMs: 10 } });
  await d.h.startWorkers();
});
afterAll(async () => d?.close());

/** Headers and cells a spreadsheet would run as formulas, and ones that only look close. */
const FORMULA_COLUMNS = ['@cmd', '+1+1', '=HYPERLINK("http://evil.example","x")', '-note', "'=already quoted", 'plain'];

describe('download → upload → download', () => {
  it('keeps headers and values, formula-like ones included, byte for byte', async () => {
    const deals = [...d.h.ws.deals.values()].slice(0, 3);
    const header = ['id', 'name', 'stage_id', ...FORMULA_COLUMNS];
    const rows = deals.map((deal, i) => [
      deal.id,
      i === 0 ? '=1+1' : `Deal ${i}`,
      'stg_missing',
      '@SUM(A1)',
      '+1',
      '=cmd|"/c calc"!A0',
      '-5',
      "'@x",
      `v${i}`,
    ]);
    const run = await d.h.waitForRun(
      (await d.h.importFile(d.h.file('formulas.csv', csv(header, rows)), 'deal.update', { ignoreUnknownColumns: true }))
        .id,
    );
    expect(run.counts.failed).toBe(3);

    const first = await d.get(`/runs/${run.id}/results.csv?failed=1`);
    expect(first.statusCode).toBe(200);
    const firstHeader = first.body.split('\n', 1)[0]!;
    // The export escapes formula-like headers and cells with a leading quote.
    expect(firstHeader).toContain("'@cmd");
    expect(firstHeader).toContain("'+1+1");

    const _csrf = csrfOf((await d.get(`/runs/${run.id}`)).body);
    const upload = multipart({ _csrf }, { field: 'file', name: 'failed.csv', content: first.body });
    const res = await d.app.inject({
      method: 'POST',
      url: `/runs/${run.id}/upload`,
      headers: { ...d.browser, origin: ORIGIN, accept: 'application/json', 'content-type': upload.contentType },
      payload: upload.body,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ progress: { read: 3 }, ignoredCount: 0, ignored: [] });
    const again = await d.h.waitForRun(run.id);
    expect(again.counts.failed).toBe(3);

    // The rows were stored under their real column names again (not under `'@cmd`).
    const stored = (await d.h.runtime.store.problems(run.id)).rows;
    expect(Object.keys(stored[0]!.original ?? {})).toEqual(header);
    expect(stored[0]!.original).toMatchObject({
      name: '=1+1',
      '@cmd': '@SUM(A1)',
      '-note': '-5',
      "'=already quoted": "'@x",
    });

    const second = await d.get(`/runs/${run.id}/results.csv?failed=1`);
    expect(second.body.split('\n', 1)[0]).toBe(firstHeader);
    const a = parse(first.body, { columns: true }) as Array<Record<string, string>>;
    const b = parse(second.body, { columns: true }) as Array<Record<string, string>>;
    expect(b).toEqual(a);
  });
});
