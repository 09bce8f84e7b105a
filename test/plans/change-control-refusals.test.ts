import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planKey } from '../../src/keys/index.js';
import { csv, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';
import { planRenames, startChangeControlHarness, type PlanJson, type RunJson } from './change-control-fixture.js';

/*
 * Change control through the CLI (issue 33), against the simulator over HTTP: discarded and
 * expired plans are refused, and a deal.upsert plan's creates go through the duplicate-safe
 * create. The plan, approve, apply walk-through: change-control-cli.test.ts.
 */

let h: Harness;
beforeAll(async () => {
  h = await startChangeControlHarness();
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

let started: Promise<unknown> | undefined;
/** The workspace's worker pool, started once for the file. */
const workers = () => (started ??= h.startWorkers());

describe('change control: plan, approve, apply (issue 33)', () => {
  it('a discarded plan and an expired one are refused (exit 2, nothing sent)', async () => {
    const a = await planRenames(h, 200, 5, 'Discarded');
    const b = await planRenames(h, 205, 5, 'Expired');
    for (const id of [a.plan.planId, b.plan.planId]) expect((await cli(['plans', 'approve', id])).code).toBe(0);
    expect((await cli(['plans', 'discard', a.plan.planId])).code).toBe(0);
    // The plan's life ended: its expiry moved into the past.
    await h.runtime.redis.hset(planKey(h.config.prefix, 'acme', b.plan.planId), 'expiresMs', Date.now() - 1000);
    const before = h.ws.stats.requests;
    const discarded = await cli(['apply', a.plan.planId]);
    expect(discarded.code).toBe(2);
    expect(discarded.stderr).toMatch(/was discarded/);
    const expired = await cli(['apply', b.plan.planId]);
    expect(expired.code).toBe(2);
    expect(expired.stderr).toMatch(/expired at/);
    expect(h.ws.stats.requests).toBe(before);
    const listed = await cli(['plans', 'list', '--json']);
    const plans = (JSON.parse(listed.stdout) as { plans: Array<{ id: string; status: string; expired: boolean }> })
      .plans;
    expect(plans.find((p) => p.id === a.plan.planId)).toMatchObject({ status: 'discarded' });
    expect(plans.find((p) => p.id === b.plan.planId)).toMatchObject({ expired: true });
    const exported = await cli(['plans', 'export', b.plan.planId, '--out', '-']);
    expect(exported.stdout.trim().split('\n')).toHaveLength(6);
    expect(exported.stdout).toContain('Expired 0');
  }, 120_000);

  it('a deal.upsert plan predicts its creates, and apply makes them through the duplicate-safe create', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 4);
    const rows: Array<Array<string | number>> = deals.map((d, i) => [
      d.name,
      i < 2 ? d.value + 100 : d.value,
      d.status,
    ]);
    rows.push(['Planned new deal A', 10, 'won'], ['Planned new deal B', 20, 'in_progress']);
    const file = h.file('upsert.csv', csv(['name', 'value', 'status'], rows));
    const writes = { ...h.ws.stats.writes };
    const before = h.ws.deals.size;
    const firstValue = deals[0]!.value;
    const made = await cli(['plan', file, '--op', 'deal.upsert', '--match', 'name', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson & { prediction: { writes: number; limit: string } };
    expect(plan.counts).toMatchObject({ create: 2, update: 2, skip: 2 });
    expect(plan.prediction).toMatchObject({ writes: 4, limit: 'unknown limit' });
    expect(h.ws.stats.writes).toEqual(writes);
    expect((await cli(['plans', 'approve', plan.planId])).code).toBe(0);
    await workers();
    const applied = await cli(['apply', plan.planId, '--wait', '--json'], { timeoutMs: 90_000 });
    expect(applied.code, applied.stderr).toBe(0);
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 4, succeeded: 4, drifted: 0 });
    expect(h.ws.stats.writes.dealCreate - writes.dealCreate).toBe(2);
    expect(h.ws.stats.writes.dealUpdate - writes.dealUpdate).toBe(2);
    expect(h.ws.deals.size).toBe(before + 2);
    expect([...h.ws.deals.values()].filter((d) => d.name.startsWith('Planned new deal'))).toHaveLength(2);
    expect(h.ws.deals.get(deals[0]!.id)!.value).toBe(firstValue + 100);
  }, 120_000);
});
