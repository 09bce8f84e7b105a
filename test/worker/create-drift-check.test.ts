import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { CrmClient } from '../../src/crm/index.js';
import type { RecordClock } from '../../src/runs/index.js';
import { startSimulator, type SimWorkspace } from '../../src/sim/index.js';
import { DriftCheck, type PlannedCreate } from '../../src/worker/drift-check.js';

/*
 * Apply's drift check of a planned create (issue 33 item 3), against the simulator over HTTP:
 * what counts as the CRM now having the plan's deal, compared as the create lookup compares
 * (names normalised, automation fields left out), and that one list read answers many rows.
 * The fence is the test's: which deals some row claimed, and a calibrated record clock.
 */

let sim: Awaited<ReturnType<typeof startSimulator>>;
let ws: SimWorkspace;
let client: CrmClient;
beforeAll(async () => {
  sim = await startSimulator({
    port: 0,
    workspaces: [{ name: 'acme', apiKeys: ['k-acme'], records: 30, seed: 5, rateLimit: null }],
  });
  ws = sim.workspace('acme');
  client = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl('acme'), apiKey: new Secret('k-acme') });
});
afterAll(async () => {
  client?.close();
  await sim?.close();
});

/** The simulator stamps created_at with this process's clock: calibrated to within a few ms. */
const CLOCK: RecordClock = { lo: -2, hi: 2, resolutionMs: 1, ageMs: 0 };

function check(options: { claimed?: Set<string>; automationFields?: string[]; maxAgeMs?: number } = {}) {
  const budget = { taken: 0, take: async () => void budget.taken++ };
  const drift = new DriftCheck({
    client,
    budget,
    maxAgeMs: options.maxAgeMs ?? 60_000,
    creates: {
      fence: {
        claimed: async (ids) => new Set(ids.filter((id) => options.claimed?.has(id))),
        recordClock: async () => CLOCK,
      },
      ...(options.automationFields ? { automationFields: options.automationFields } : {}),
    },
  });
  return { drift, budget };
}

let runs = 0;
const planned = (madeAt: number, more: Partial<PlannedCreate> = {}): PlannedCreate => ({
  madeAt,
  runId: `run-${++runs}`,
  ...more,
});

describe('DriftCheck.checkCreate', () => {
  it('a deal that now holds the match key is drifted, named; another key holds', async () => {
    const madeAt = Date.now();
    const theirs = ws.createDeal({ name: 'Key Holder One', value: 5 });
    const { drift } = check();
    expect(
      await drift.checkCreate({ name: 'Key Holder One', value: 7 }, planned(madeAt, { match: 'name=Key Holder One' })),
    ).toEqual({
      kind: 'drifted',
      message: `not sent: a deal with name "Key Holder One" was made since the plan (it planned to create one): ${theirs.id}`,
    });
    expect(
      await drift.checkCreate({ name: 'Key Holder Two', value: 7 }, planned(madeAt, { match: 'name=Key Holder Two' })),
    ).toEqual({ kind: 'holds' });
  });

  it('a deal alike in every field sent, made since the plan and claimed by nobody, is drifted; names compare as the CRM compares them', async () => {
    const madeAt = Date.now();
    await sleep(5);
    const theirs = ws.createDeal({ name: '  ALIKE   since plan ', value: 12, status: 'won' });
    const other = ws.createDeal({ name: 'Alike other value', value: 13 });
    const { drift } = check();
    const row = { name: 'Alike since plan', value: 12, status: 'won' };
    expect(await drift.checkCreate(row, planned(madeAt, { match: 'unique_number=D-NEW-1' }))).toEqual({
      kind: 'drifted',
      message: `not sent: a deal like this one was made since the plan: ${theirs.id}`,
    });
    // Another value: another deal.
    expect(await drift.checkCreate({ ...row, value: 99 }, planned(madeAt))).toEqual({ kind: 'holds' });
    expect(await drift.checkCreate({ name: 'Alike other value', value: 14 }, planned(madeAt))).toEqual({
      kind: 'holds',
    });
    expect(other.id).toBeDefined();
  });

  it('holds for a deal made before the plan, or one some row claimed', async () => {
    const before = ws.createDeal({ name: 'Made before the plan', value: 1 });
    await sleep(20);
    const madeAt = Date.now();
    await sleep(5);
    const claimed = ws.createDeal({ name: 'Claimed since plan', value: 2 });
    const { drift } = check({ claimed: new Set([claimed.id]) });
    expect(await drift.checkCreate({ name: 'Made before the plan', value: 1 }, planned(madeAt))).toEqual({
      kind: 'holds',
    });
    expect(await drift.checkCreate({ name: 'Claimed since plan', value: 2 }, planned(madeAt))).toEqual({
      kind: 'holds',
    });
    expect(before.id).not.toBe(claimed.id);
  });

  it("fields the workspace's automation sets are not compared", async () => {
    const madeAt = Date.now();
    await sleep(5);
    const theirs = ws.createDeal({ name: 'Automated status deal', value: 3, status: 'lost' });
    const row = { name: 'Automated status deal', value: 3, status: 'won' };
    expect(await check().drift.checkCreate(row, planned(madeAt))).toEqual({ kind: 'holds' });
    expect(await check({ automationFields: ['status'] }).drift.checkCreate(row, planned(madeAt))).toEqual({
      kind: 'drifted',
      message: `not sent: a deal like this one was made since the plan: ${theirs.id}`,
    });
  });

  it('with `until` (another create of the plan has the name), deals made after it are not counted', async () => {
    const madeAt = Date.now();
    await sleep(5);
    const first = ws.createDeal({ name: 'Twin window deal', value: 4 });
    await sleep(20);
    const until = Date.now();
    await sleep(20);
    const second = ws.createDeal({ name: 'Twin window deal', value: 4 }); // another row's, its answer on the way
    const { drift } = check();
    expect(await drift.checkCreate({ name: 'Twin window deal', value: 4 }, planned(madeAt, { until }))).toEqual({
      kind: 'drifted',
      message: `not sent: a deal like this one was made since the plan: ${first.id}`,
    });
    // Without it, every deal alike made since the plan counts.
    expect(await drift.checkCreate({ name: 'Twin window deal', value: 4 }, planned(madeAt))).toEqual({
      kind: 'drifted',
      message: `not sent: a deal like this one was made since the plan: ${first.id}, ${second.id}`,
    });
  });

  it("one list read answers a run's rows; a new run's first check reads the list again", async () => {
    const { drift, budget } = check();
    const madeAt = Date.now();
    const p = planned(madeAt);
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => drift.checkCreate({ name: `Never made ${i}`, value: i }, p)),
    );
    expect(answers.every((a) => a.kind === 'holds')).toBe(true);
    expect(drift.stats.passes).toBe(1);
    expect(budget.taken).toBe(drift.stats.pages);
    // The read is fresh (maxAgeMs 60 s), but a deal made before another run's apply is seen.
    const theirs = ws.createDeal({ name: 'Made before the next apply', value: 8 });
    expect(await drift.checkCreate({ name: 'Made before the next apply', value: 8 }, planned(madeAt))).toMatchObject({
      kind: 'drifted',
    });
    expect(drift.stats.passes).toBe(2);
    expect(theirs.id).toBeDefined();
  });

  it('refuses to check a create without the fence', async () => {
    const drift = new DriftCheck({ client, budget: { take: async () => undefined }, maxAgeMs: 0 });
    await expect(drift.checkCreate({ name: 'x' }, planned(Date.now()))).rejects.toThrow(/options.creates/);
  });
});
