import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunKeys } from '../../src/keys/index.js';
import { retryRun } from '../../src/lifecycle/index.js';
import {
  FAULTED_POST_LATENCY,
  calibrateRecordClock,
  csv,
  dealValuesFile,
  resultsByRow,
  startHarness,
  type Harness,
} from '../helpers/pipeline.js';
import { POST_DEALS, dealsNamed } from './create-fixtures.js';

/*
 * Answers from a CRM no one here wrote (issue 43, items 1 and 2), made by the fault proxy in
 * front of the simulator: an update answered with another record's id, a create answered 2xx
 * with a deal another row already recorded. Each is a CRM fault the row's result reports —
 * `uncertain`, for the write may have happened — never a result re-keyed to the answer's id,
 * never `failed` (a failed create is one an operator imports again).
 */

describe('answers that name another record', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ records: 10, seed: 43, crmProxy: true, createSettleMs: 300, requestTimeoutMs: 1500 });
    await h.startWorkers({ concurrency: 2, sweepIntervalMs: 300 });
  });
  afterAll(async () => h?.close());

  it('an update whose answer names another id is not recorded under that id: uncertain, naming both, the other rows as they were', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 3);
    const [, target] = deals;
    const other = [...h.ws.deals.values()][8]!;
    const targetPath = new RegExp(`/v2/deals/${encodeURIComponent(target!.id)}$`);
    h.proxy!.setRules([
      {
        method: 'PATCH',
        path: targetPath,
        times: 1,
        rewriteAnswer: (json) => {
          const { deal } = json as { deal: Record<string, unknown> };
          return { deal: { ...deal, id: other.id } };
        },
      },
    ]);
    const run = await h.waitForRun(
      (await h.importFile(dealValuesFile(h, 'answered-other.csv', 700, deals), 'deal.update')).id,
    );
    expect(h.proxy!.unspent()).toBe(0);
    const results = await resultsByRow(h, run.id);
    expect(results.map((r) => r.status)).toEqual(['succeeded', 'uncertain', 'succeeded']);
    expect(results[0]!.recordId).toBe(deals[0]!.id);
    expect(results[2]!.recordId).toBe(deals[2]!.id);
    const doubt = results[1]!;
    expect(doubt.recordId).not.toBe(other.id);
    expect(doubt.code).toBe('CRM_BAD_RESPONSE');
    expect(doubt.message).toContain(`record "${other.id}"`);
    expect(doubt.message).toContain(`record "${target!.id}"`);
    expect(run.counts).toMatchObject({ succeeded: 2, uncertain: 1, failed: 0 });
    // No result of the run names the answer's record.
    expect(results.filter((r) => r.recordId === other.id)).toHaveLength(0);
    // It was written (the proxy changed only the answer): the CRM holds the row's value.
    expect(h.ws.deals.get(target!.id)?.value).toBe(701);
  }, 40_000);

  it('a create answered with a deal another row recorded ends uncertain, and runs retry finds its deal by a lookup and sends no POST for it', async () => {
    await calibrateRecordClock(h);
    const first = await h.waitForRun(
      (await h.importFile(h.file('taken-1.csv', csv(['name', 'value'], [['Taken A', 10]])), 'deal.create')).id,
    );
    const [recorded] = await resultsByRow(h, first.id);
    expect(recorded).toMatchObject({ status: 'succeeded' });
    const takenId = recorded!.recordId!;
    h.proxy!.setRules([
      {
        ...POST_DEALS,
        ...FAULTED_POST_LATENCY,
        times: 1,
        rewriteAnswer: (json) => {
          const { deal } = json as { deal: Record<string, unknown> };
          return { deal: { ...deal, id: takenId } };
        },
      },
    ]);
    const run = await h.waitForRun(
      (await h.importFile(h.file('taken-2.csv', csv(['name', 'value'], [['Taken B', 20]])), 'deal.create')).id,
    );
    expect(h.proxy!.unspent()).toBe(0);
    const [doubt] = await resultsByRow(h, run.id);
    expect(doubt).toMatchObject({ status: 'uncertain', code: 'CREATE_CONFLICT' });
    expect(doubt!.recordId).toBeUndefined();
    expect(doubt!.message).toContain(takenId);
    expect(run.counts).toMatchObject({ uncertain: 1, failed: 0 });
    // The CRM did make B's deal (only the answer named A's).
    expect(dealsNamed(h, 'Taken B')).toHaveLength(1);

    const posts = h.proxy!.count('POST', POST_DEALS.path);
    await retryRun({ runId: run.id, queue: h.runtime.queue('acme'), store: h.runtime.store });
    const again = await h.waitForRun(run.id, 20_000, (r) => r.counts.queued === 0 && r.status !== 'running');
    const [after] = await resultsByRow(h, again.id);
    // It looked first and found a deal like it: not sent again.
    expect(h.proxy!.count('POST', POST_DEALS.path) - posts).toBe(0);
    // B's deal was stamped well after its send (the POST's latency, a calibrated clock), so the
    // lookup tells it is this row's: recorded as found, not as the deal the answer named.
    expect(after).toMatchObject({ status: 'succeeded', recordId: dealsNamed(h, 'Taken B')[0]!.id });
    expect(after!.message).toMatch(/found by a lookup/);
    expect(dealsNamed(h, 'Taken B')).toHaveLength(1);
    // A's result is A's, untouched.
    expect((await resultsByRow(h, first.id))[0]).toMatchObject({ status: 'succeeded', recordId: takenId });
  }, 60_000);
});

describe('a created deal stamped in the 1890s', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ records: 2, seed: 44, crmProxy: true, createSettleMs: 300 });
    await h.startWorkers({ concurrency: 1 });
  });
  afterAll(async () => h?.close());

  it('does not calibrate the record clock; a plausible stamp does', async () => {
    const clockKey = new RunKeys(h.config.prefix).recordClock('acme');
    h.proxy!.setRules([
      {
        ...POST_DEALS,
        times: 1,
        rewriteAnswer: (json) => {
          const { deal } = json as { deal: Record<string, unknown> };
          return { deal: { ...deal, created_at: '1893-03-01T12:00:00.000Z' } };
        },
      },
    ]);
    const old = await h.waitForRun(
      (await h.importFile(h.file('old.csv', csv(['name', 'value'], [['Stamped 1893', 1]])), 'deal.create')).id,
    );
    expect(h.proxy!.unspent()).toBe(0);
    expect(old.counts.succeeded).toBe(1);
    expect(await h.runtime.redis.get(clockKey)).toBeNull();
    const now = await h.waitForRun(
      (await h.importFile(h.file('now.csv', csv(['name', 'value'], [['Stamped now', 2]])), 'deal.create')).id,
    );
    expect(now.counts.succeeded).toBe(1);
    expect(await h.runtime.redis.get(clockKey)).not.toBeNull();
  }, 40_000);
});
