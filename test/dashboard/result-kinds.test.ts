import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FINAL_ROW_STATUSES, type FinalRowStatus, type RowResult } from '../../src/runs/index.js';
import { startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

/*
 * Every result kind the run store has is shown wherever the dashboard shows counts: the run
 * page's tiles, the runs list, /metrics; and the Workspaces page counts waiting rows as the run
 * page does. The kinds are walked from the run store's own list, so a kind added there and not
 * shown here fails this test.
 */

let d: DashboardHarness;
let runId: string;
/** A distinct count per kind, so a count shown under the wrong kind is caught. */
const COUNT = Object.fromEntries(FINAL_ROW_STATUSES.map((k, i) => [k, 11 + i])) as Record<FinalRowStatus, number>;
const WAITING = 9;

beforeAll(async () => {
  d = await startDashboardHarness();
  const { store } = d.h.runtime;
  const run = await store.createRun({
    workspace: 'acme',
    operation: 'deal.update',
    source: '/tmp/exports/kinds.csv',
    columns: ['id', 'name'],
  });
  runId = run.id;
  const total = FINAL_ROW_STATUSES.reduce((sum, k) => sum + COUNT[k], 0) + WAITING;
  await store.addQueued(run.id, total);
  const at = new Date().toISOString();
  const results: RowResult[] = [];
  let row = 0;
  for (const kind of FINAL_ROW_STATUSES) {
    for (let i = 0; i < COUNT[kind]; i++) {
      row++;
      results.push({
        row,
        line: row + 1,
        status: kind,
        at,
        ...(kind === 'failed' ? { code: 'CRM_REJECTED', httpStatus: 422, message: 'unknown stage stg_1' } : {}),
        ...(kind === 'invalid' ? { code: 'VALIDATION', errors: [{ field: 'name', message: 'is required' }] } : {}),
        ...(kind !== 'succeeded' && kind !== 'skipped' ? { original: { id: `d${row}`, name: `n${row}` } } : {}),
      });
    }
  }
  await store.recordResults(run.id, results);
  await store.finishProducing(run.id);
}, 30_000);

afterAll(async () => {
  await d?.close();
});

const n = (v: number) => v.toLocaleString('en-US');

describe('every result kind of the run store', () => {
  it('has a tile on the run page, and the tiles add up to the rows', async () => {
    const body = (await d.get(`/runs/${runId}`)).body;
    let sum = 0;
    for (const kind of FINAL_ROW_STATUSES) {
      const tile = new RegExp(`data-kind="${kind}"[^>]*><b>([\\d,]+)</b><span>([^<]+)</span>`).exec(body);
      expect(tile, `tile for ${kind}`).not.toBeNull();
      expect(tile![1], kind).toBe(n(COUNT[kind]));
      sum += COUNT[kind];
    }
    expect(body).toMatch(/data-kind="cancelled"[^>]*><b>[\d,]+<\/b><span>Cancelled<\/span>/);
    expect(body).toMatch(new RegExp(`data-kind="queued"[^>]*><b>${WAITING}</b>`));
    expect(body).toMatch(new RegExp(`data-kind="total"[^>]*><b>${n(sum + WAITING)}</b>`));
  });

  it('titles the rows table with the problem kinds the run has', async () => {
    const body = (await d.get(`/runs/${runId}`)).body;
    expect(body).toContain('<h2 id="problems">Failed, invalid, uncertain and cancelled rows</h2>');
  });

  it('is a line of the run in the runs list', async () => {
    const body = (await d.get('/')).body;
    for (const kind of FINAL_ROW_STATUSES) {
      expect(body, kind).toMatch(new RegExp(`data-kind="${kind}"[^>]*><b>${n(COUNT[kind])}</b>`));
    }
  });

  it('is a series of /metrics', async () => {
    const text = (await d.get('/metrics', d.bearer)).body;
    for (const kind of FINAL_ROW_STATUSES) {
      expect(text, kind).toContain(`crm_sync_rows{operation="deal.update",status="${kind}"} ${COUNT[kind]}`);
    }
  });

  it('names what "Retry" retries: every kind it sends again, with their sum', async () => {
    const body = (await d.get(`/runs/${runId}`)).body;
    const sendable = COUNT.failed + COUNT.uncertain + COUNT.cancelled;
    expect(body).toContain(`>Retry ${sendable} failed, uncertain and cancelled rows</button>`);
    expect(body).not.toMatch(/Retry all [\d,]+ failed rows/);
  });

  it('says why drifted rows were not written, and that a new plan, not Retry, sends them', async () => {
    const body = (await d.get(`/runs/${runId}`)).body;
    const notice = /<div class="notice warn" data-notice="drifted">(.*?)<\/div>/s.exec(body)?.[1];
    expect(notice).toContain(`<b>${n(COUNT.drifted)} rows drifted:</b>`);
    expect(notice).toContain('not written');
    expect(notice).toContain('make a new plan');
  });

  it('"Retry" sends again exactly the kinds it names', async () => {
    const res = await d.post(`/runs/${runId}/retry`, { scope: 'failed' });
    expect(res.statusCode).toBe(303);
    const after = await d.h.runtime.store.requireRun(runId);
    expect(after.counts).toMatchObject({ failed: 0, uncertain: 0, cancelled: 0, invalid: COUNT.invalid });
    expect(after.counts.queued).toBe(WAITING + COUNT.failed + COUNT.uncertain + COUNT.cancelled);
  });

  it('the Workspaces page counts waiting rows, as the run page does', async () => {
    const body = (await d.get('/workspaces')).body;
    const waiting = (await d.h.runtime.store.requireRun(runId)).counts.queued;
    expect(body).toMatch(new RegExp(`data-waiting-rows>${n(waiting)}<`));
  });

  it('a paused workspace: no time left is claimed, the pause reason is said once', async () => {
    await d.h.runtime.store.setHold('acme', 'paused', 'paused by an operator');
    try {
      const body = (await d.get(`/runs/${runId}`)).body;
      expect(body).not.toMatch(/ left</);
      expect(body).toContain('waiting: the workspace is paused or held');
      expect(body).not.toContain('paused by an operator (paused by an operator)');
      expect(body).toContain('is paused by an operator</b>');
    } finally {
      await d.h.runtime.store.liftHold('acme', 'paused');
    }
  });
});
