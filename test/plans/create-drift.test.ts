import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POST_DEALS, dealsNamed } from '../faults/create-fixtures.js';
import {
  calibrateRecordClock,
  csv,
  FAULTED_POST_LATENCY,
  resultsByRow,
  startHarness,
  type Harness,
} from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Issue 33 item 3 for creates, through the CLI against the simulator over HTTP (a fault proxy in
 * front) and real Redis: a deal.upsert plan predicts creates; between plan and apply a person
 * makes some of those deals. Apply sends none of those (`drifted`) and leaves the person's deals
 * as they are, while a create whose answer the proxy drops during apply still ends with exactly
 * one deal, recorded `succeeded`: the drift check never takes a row's own deal for a person's.
 */

interface PlanJson {
  planId: string;
  counts: Record<string, number>;
}
interface RunJson {
  id: string;
  status: string;
  counts: Record<string, number>;
}

const LIST_DEALS = /\/v2\/deals$/;

/** A run's results by row number. */
async function byRow(h: Harness, runId: string) {
  return new Map((await resultsByRow(h, runId)).map((r) => [r.row, r]));
}

async function planAndApply(cli: ReturnType<typeof cliFor>, plan: () => Promise<PlanJson>) {
  const made = await plan();
  const run = await cli(['apply', made.planId, '--wait', '--json'], { timeoutMs: 90_000 });
  return { plan: made, code: run.code, stderr: run.stderr, run: JSON.parse(run.stdout) as RunJson };
}

describe('a planned create whose deal a person made meanwhile (issue 33 item 3)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ records: 40, crmProxy: true });
    await h.startWorkers();
  });
  afterAll(async () => h?.close());
  const cli = cliFor(() => h);

  it('ends drifted, sends nothing for it and leaves the deal as the person made it; the other creates go', async () => {
    const rows: Array<Array<string | number>> = [
      ['Person Made Deal A', 42, 'won'], // the person makes it as planned: its match key is now taken
      ['Person Made Deal B', 43, 'won'], // the person makes it with another spelling: equal as the CRM compares names
      ['Person Made Deal C', 44, 'won'], // the person makes one named alike (another key) for another value: not like it
      ['Planned Fresh Deal D', 45, 'won'], // nobody makes it
    ];
    const file = h.file('person-made.csv', csv(['name', 'value', 'status'], rows));
    const made = await cli(['plan', file, '--op', 'deal.upsert', '--match', 'name', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect(plan.counts).toMatchObject({ create: 4, update: 0 });

    // Between plan and apply, a person makes three deals in the CRM.
    const a = h.ws.createDeal({ name: 'Person Made Deal A', value: 42, status: 'won' });
    const b = h.ws.createDeal({ name: '  person made   DEAL b ', value: 43, status: 'won' });
    const c = h.ws.createDeal({ name: 'person made deal c', value: 99, status: 'won' });
    const theirs = [a, b].map((d) => JSON.stringify(h.ws.deals.get(d.id)));
    const writes = { ...h.ws.stats.writes };
    const pagesBefore = h.proxy!.count('GET', LIST_DEALS);

    const applied = await cli(['apply', plan.planId, '--wait', '--json'], { timeoutMs: 90_000 });
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 4, succeeded: 2, drifted: 2, failed: 0, uncertain: 0 });
    expect(applied.code).toBe(1); // drifted rows need a person
    // Nothing was sent for the drifted rows: two creates (C, with another value than the
    // person's deal, and D), no update of anything.
    expect(h.ws.stats.writes.dealCreate - writes.dealCreate).toBe(2);
    expect(h.ws.stats.writes.dealUpdate - writes.dealUpdate).toBe(0);
    expect([a, b].map((d) => JSON.stringify(h.ws.deals.get(d.id)))).toEqual(theirs);
    expect(dealsNamed(h, 'Person Made Deal A')).toHaveLength(1);
    expect(
      dealsNamed(h, 'Person Made Deal C')
        .map((d) => d.value)
        .sort(),
    ).toEqual([44, 99]);
    expect(dealsNamed(h, 'Planned Fresh Deal D')).toHaveLength(1);
    expect(c.id).not.toBe(dealsNamed(h, 'Person Made Deal C').find((d) => d.value === 44)!.id);
    // The check reads the list in passes, never one request per row.
    expect(h.proxy!.count('GET', LIST_DEALS) - pagesBefore).toBeLessThanOrEqual(4);

    const results = await byRow(h, run.id);
    expect(results.get(1)).toMatchObject({ status: 'drifted' });
    expect(results.get(1)!.message).toBe(
      `not sent: a deal with name "Person Made Deal A" was made since the plan (it planned to create one): ${a.id}`,
    );
    expect(results.get(2)!.message).toBe(`not sent: a deal like this one was made since the plan: ${b.id}`);
    expect(results.get(3)).toMatchObject({ status: 'succeeded' });
    expect(results.get(4)).toMatchObject({ status: 'succeeded' });
    const shown = await cli(['runs', 'show', run.id, '--problems', '10']);
    expect(shown.stdout).toMatch(/2 drifted/);
    expect(shown.stdout).toContain(`drifted: not sent: a deal like this one was made since the plan: ${b.id}`);
  }, 120_000);

  it('by unique_number (a key the CRM assigns, never sent): a deal like the row made meanwhile is drifted', async () => {
    const file = h.file(
      'by-number.csv',
      csv(
        ['unique_number', 'name', 'value'],
        [
          ['D-PLAN-000001', 'Numbered Planned Deal', 51],
          ['D-PLAN-000002', 'Other Numbered Deal', 52],
        ],
      ),
    );
    const made = await cli(['plan', file, '--op', 'deal.upsert', '--match', 'unique_number', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect(plan.counts).toMatchObject({ create: 2 });
    const theirs = h.ws.createDeal({ name: 'Numbered Planned Deal', value: 51 });
    const before = JSON.stringify(h.ws.deals.get(theirs.id));
    const writes = { ...h.ws.stats.writes };
    const applied = await cli(['apply', plan.planId, '--wait', '--json'], { timeoutMs: 90_000 });
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 2, succeeded: 1, drifted: 1 });
    expect(h.ws.stats.writes.dealCreate - writes.dealCreate).toBe(1);
    expect(h.ws.stats.writes.dealUpdate - writes.dealUpdate).toBe(0);
    expect(JSON.stringify(h.ws.deals.get(theirs.id))).toBe(before);
    const results = await byRow(h, run.id);
    expect(results.get(1)!.message).toBe(`not sent: a deal like this one was made since the plan: ${theirs.id}`);
    expect(results.get(2)).toMatchObject({ status: 'succeeded' });
  }, 120_000);
});

describe('a planned create whose answer is dropped during apply (the drift check re-reads the list every time)', () => {
  let h: Harness;
  beforeAll(async () => {
    // driftMaxAgeMs 0: every check reads the list again, so the retry after the lost answer sees
    // its own deal there (unclaimed, with the row's name): only its create marker tells it apart.
    h = await startHarness({ records: 20, crmProxy: true, workspace: { driftMaxAgeMs: 0 } });
    await h.startWorkers();
    // A lost answer's deal is the row's own only by the calibrated record clock.
    await calibrateRecordClock(h);
  });
  afterAll(async () => h?.close());
  const cli = cliFor(() => h);

  it("rows of one plan alike in every field each get their deal: none takes another's (answer held) for a person's", async () => {
    const rows = Array.from({ length: 4 }, (_, i) => [`D-TWIN-00000${i}`, 'Twin Planned Deal', 70]);
    const file = h.file('twins.csv', csv(['unique_number', 'name', 'value'], rows));
    const made = await cli(['plan', file, '--op', 'deal.upsert', '--match', 'unique_number', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect(plan.counts).toMatchObject({ create: 4 });
    // Two deals stay unclaimed in the CRM a while (answers held) as the other rows check.
    h.proxy!.setRules([{ ...POST_DEALS, holdAnswer: 800, times: 2 }]);
    const applied = await cli(['apply', plan.planId, '--wait', '--json'], { timeoutMs: 90_000 });
    expect(applied.code, applied.stderr).toBe(0);
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(h.proxy!.unspent()).toBe(0);
    expect(run.counts).toMatchObject({ total: 4, succeeded: 4, drifted: 0 });
    const deals = dealsNamed(h, 'Twin Planned Deal');
    expect(deals).toHaveLength(4);
    const ids = [...(await byRow(h, run.id)).values()].map((r) => r.recordId);
    expect(new Set(ids)).toEqual(new Set(deals.map((d) => d.id)));
  }, 120_000);

  it('ends with exactly one deal, recorded succeeded by the lookup (not drifted)', async () => {
    const file = h.file('dropped.csv', csv(['name', 'value', 'status'], [['Dropped Answer Deal', 60, 'won']]));
    const postsBefore = h.proxy!.count('POST', POST_DEALS.path);
    const { run, code, stderr } = await planAndApply(cli, async () => {
      const made = await cli(['plan', file, '--op', 'deal.upsert', '--match', 'name', '-w', 'acme', '--json']);
      expect(made.code, made.stderr).toBe(0);
      const plan = JSON.parse(made.stdout) as PlanJson;
      expect(plan.counts).toMatchObject({ create: 1 });
      // The CRM applies the create and the answer never reaches the worker.
      h.proxy!.setRules([{ ...POST_DEALS, applyAndDrop: true, times: 1, ...FAULTED_POST_LATENCY }]);
      return plan;
    });
    expect(code, stderr).toBe(0);
    expect(h.proxy!.unspent()).toBe(0); // the answer was dropped
    expect(run.counts).toMatchObject({ total: 1, succeeded: 1, drifted: 0, uncertain: 0, failed: 0 });
    const deals = dealsNamed(h, 'Dropped Answer Deal');
    expect(deals).toHaveLength(1);
    const result = (await byRow(h, run.id)).get(1)!;
    expect(result).toMatchObject({ status: 'succeeded', recordId: deals[0]!.id });
    expect(result.message).toContain('found by a lookup');
    // One POST: the retry found the deal instead of sending again.
    expect(h.proxy!.count('POST', POST_DEALS.path) - postsBefore).toBe(1);
  }, 120_000);
});
