import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { CrmClient } from '../../src/crm/index.js';
import { ApplyReads, predictApply } from '../../src/plans/apply-prediction.js';
import { startSimulator, type SimWorkspace } from '../../src/sim/index.js';
import { DriftCheck } from '../../src/worker/drift-check.js';

/*
 * Apply's drift check of planned updates (issue 33 item 3) against the simulator over HTTP:
 * a row that knows where the plan saw its record reads that one page, shared by the rows on it;
 * a record no longer there, and rows spread over more than DRIFT_PAGE_READ_SHARE of the list,
 * fall back to one whole-list read. And the plan's prediction counts the pages by the same rules.
 */

const PAGE = 10;
let sim: Awaited<ReturnType<typeof startSimulator>>;
let ws: SimWorkspace;
let client: CrmClient;
let ids: string[];
beforeAll(async () => {
  sim = await startSimulator({
    port: 0,
    workspaces: [{ name: 'acme', apiKeys: ['k-acme'], records: 250, seed: 3, rateLimit: null }],
  });
  ws = sim.workspace('acme');
  client = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl('acme'), apiKey: new Secret('k-acme') });
  ids = [...ws.contacts.keys()]; // creation order: the list's order
});
afterAll(async () => {
  client?.close();
  await sim?.close();
});

function check(maxAgeMs = 60_000) {
  const budget = { taken: 0, take: async () => void budget.taken++ };
  return { drift: new DriftCheck({ client, budget, maxAgeMs, pageSize: PAGE }), budget };
}

const nameOf = (id: string) => ws.contacts.get(id)!.name;
let runs = 0;

describe('DriftCheck.check compares an email as the CRM does (issue 46, item 5)', () => {
  it('a record whose address a person re-cased still holds it; one with another address has drifted', async () => {
    const { drift } = check();
    const [recased, moved] = [ids[10]!, ids[11]!];
    const before = (id: string) => ws.contacts.get(id)!.email;
    const recasedWas = before(recased);
    const movedWas = before(moved);
    const at = recasedWas.lastIndexOf('@');
    ws.updateRecord('contacts', recased, { email: recasedWas.slice(0, at).toUpperCase() + recasedWas.slice(at) });
    ws.updateRecord('contacts', moved, { email: `moved.${moved}@example.com` });
    const run = `run-email-${++runs}`;
    const holds = await drift.check(
      run,
      'contacts',
      recased,
      { email: recasedWas },
      { email: `new.${recased}@example.com` },
    );
    expect(holds).toEqual({ kind: 'holds' });
    const drifted = await drift.check(
      run,
      'contacts',
      moved,
      { email: movedWas },
      { email: `new.${moved}@example.com` },
    );
    expect(drifted).toMatchObject({ kind: 'drifted', changed: [{ field: 'email' }] });
    // The row's own address in another case is already there: nothing to send for it.
    const already = await drift.check(
      run,
      'contacts',
      moved,
      { email: movedWas },
      { email: `MOVED.${moved}@example.com` },
    );
    expect(already).toEqual({ kind: 'holds', already: ['email'] });
  });
});

describe("DriftCheck.check with the plan's places", () => {
  it("reads only the page that holds the rows' records, once for the rows on it, and sees an edit there", async () => {
    const { drift, budget } = check();
    const run = `run-${++runs}`;
    const place = 42;
    const onPage = ids.slice(40, 45); // the first half of page 5: no read-ahead of page 6
    const edited = onPage[3]!;
    const before = new Map(onPage.map((id) => [id, nameOf(id)]));
    ws.updateRecord('contacts', edited, { name: 'A person was here' });
    const answers = await Promise.all(
      onPage.map((id, i) =>
        drift.check(run, 'contacts', id, { name: before.get(id)! }, { name: `New ${i}` }, { place: 40 + i }),
      ),
    );
    expect(answers.filter((a) => a.kind === 'drifted')).toHaveLength(1);
    expect(answers[3]).toMatchObject({ kind: 'drifted', message: expect.stringContaining('A person was here') });
    expect(drift.stats).toEqual({ passes: 0, pageReads: 1, pages: 1 });
    expect(budget.taken).toBe(1);
    // Fresh for this run; another run's first check reads the page again.
    await drift.check(run, 'contacts', ids[place]!, { name: nameOf(ids[place]!) }, { name: 'x' }, { place });
    expect(drift.stats.pageReads).toBe(1);
    await drift.check(
      `run-${++runs}`,
      'contacts',
      ids[place]!,
      { name: nameOf(ids[place]!) },
      { name: 'x' },
      { place },
    );
    expect(drift.stats.pageReads).toBe(2);
  });

  it('looks a record up in a whole-list read when it is no longer where the plan saw it', async () => {
    const { drift, budget } = check();
    const id = ids[200]!;
    const answer = await drift.check(
      `run-${++runs}`,
      'contacts',
      id,
      { name: nameOf(id) },
      { name: 'y' },
      { place: 3 },
    );
    expect(answer).toEqual({ kind: 'holds' });
    expect(drift.stats).toEqual({ passes: 1, pageReads: 1, pages: 1 + 25 });
    // Every request takes a token: the pages, and the empty page after the last full one (spec §8.1 rule 2).
    expect(budget.taken).toBe(drift.stats.pages + 1);
  });

  it('reads the whole list once rows spread over more than a quarter of its pages in the window', async () => {
    const { drift, budget } = check();
    const run = `run-${++runs}`;
    // One row on each of 20 pages (25 pages of 10): 7 single pages reach a quarter, then one pass.
    for (let p = 0; p < 20; p++) {
      const place = p * PAGE + 1;
      const id = ids[place]!;
      expect(await drift.check(run, 'contacts', id, { name: nameOf(id) }, { name: 'z' }, { place })).toEqual({
        kind: 'holds',
      });
    }
    expect(drift.stats).toEqual({ passes: 1, pageReads: 7, pages: 7 + 25 });
    expect(budget.taken).toBe(drift.stats.pages + 1);
  });
});

describe('DriftCheck.check of the fields a row carries unchanged (issue 41, item 2)', () => {
  it("holds a deal's name sent unchanged to the value sent; a field the CRM does not report is not checked", async () => {
    const { drift } = check();
    const run = `run-${++runs}`;
    const [calm, renamed] = [...ws.deals.values()].slice(0, 2).map((d) => ({ id: d.id, name: d.name, value: d.value }));
    ws.updateRecord('deals', renamed!.id, { name: 'A person renamed it' });
    // A value change, the name riding along as the plan read it (the API requires one), position unknown.
    const ask = (d: typeof calm) =>
      drift.check(
        run,
        'deals',
        d!.id,
        { value: String(d!.value) },
        { name: d!.name, value: d!.value + 1, position: 3 },
      );
    expect(await ask(calm)).toEqual({ kind: 'holds' });
    expect(await ask(renamed)).toEqual({
      kind: 'drifted',
      message: `not sent: the record changed since the plan: name is now "A person renamed it" in the CRM (planned unchanged at ${JSON.stringify(renamed!.name)})`,
      changed: [{ field: 'name', now: 'A person renamed it', planned: renamed!.name, carried: true }],
    });
    // A row with no before-value at all (only an unreported field changes) is still held to its name.
    expect(await drift.check(run, 'deals', renamed!.id, {}, { name: renamed!.name, position: 3 })).toMatchObject({
      kind: 'drifted',
    });
  });
});

describe('predictApply', () => {
  const settings = { driftMaxAgeMs: 10_000, rateLimit: { max: 200, durationMs: 1000 } };
  it('counts one page per page of records that sit together, and whole-list passes for writes without a place', () => {
    const together = new ApplyReads();
    for (let i = 0; i < 10_000; i++) together.write(i);
    expect(predictApply(together, 100_000, { settings })).toMatchObject({
      writes: 10_000,
      listPages: 101, // the 100 pages, and page 101 read ahead by the last rows
      requests: 10_101,
      seconds: 51,
    });
    // Unknown limit: the least apply reads (no read goes stale).
    expect(predictApply(together, 100_000, { settings: { driftMaxAgeMs: 10_000 } })).toMatchObject({
      listPages: 101,
      limit: 'unknown limit',
    });
    // No places: a pass of 1,000 pages (5 s) at the start, then one whenever the last is older than 20 s.
    const anywhere = predictApply(10_000, 100_000, { settings });
    expect(anywhere.listPages % 1000).toBe(0);
    expect(anywhere.listPages).toBeGreaterThanOrEqual(2000);
    // Rows spread over every page: never more than a whole pass per window plus a quarter of one.
    const spread = new ApplyReads();
    for (let i = 0; i < 10_000; i++) spread.write((i * 7919) % 100_000);
    const p = predictApply(spread, 100_000, { settings });
    expect(p.listPages).toBeLessThanOrEqual(anywhere.listPages * 1.25 + 250);
  });
});

describe("DriftCheck.values: a plain import's before-values (beforeMaxAgeMs)", () => {
  it('a pass serves before-values for beforeMaxAgeMs; a drift check past driftMaxAgeMs reads the list again, and sees an edit', async () => {
    const budget = { taken: 0, take: async () => void budget.taken++ };
    const drift = new DriftCheck({ client, budget, maxAgeMs: 50, beforeMaxAgeMs: 60_000, pageSize: PAGE });
    const run = `run-before-${++runs}`;
    const [a, b] = [ids[20]!, ids[21]!];
    const started = Date.now();
    expect((await drift.values(run, 'contacts', a))?.name).toBe(nameOf(a));
    const passMs = Date.now() - started;
    const pages = budget.taken;
    expect(pages).toBe(Math.ceil(ids.length / PAGE) + 1); // every page, and the empty one after
    // Past the drift check's freshness (driftMaxAgeMs, or DRIFT_PASS_SPACING × the pass), within beforeMaxAgeMs.
    await new Promise((r) => setTimeout(r, Math.max(100, 5 * passMs) + 50));
    ws.updateRecord('contacts', b, { name: 'Edited meanwhile' });
    // Before-values: the pass is still fresh for them (no request), read before the edit.
    expect(drift.freshValues(run, 'contacts', b)).toBeDefined();
    expect((await drift.values(run, 'contacts', b))?.name).not.toBe('Edited meanwhile');
    expect(budget.taken).toBe(pages);
    expect(drift.stats.passes).toBe(1);
    // A drift check is not served by it: it reads the list anew and sees the edit.
    const seen = await drift.check(run, 'contacts', b, { name: 'Someone' }, { name: 'New' });
    expect(seen).toMatchObject({ kind: 'drifted', changed: [{ field: 'name', now: 'Edited meanwhile' }] });
    expect(drift.stats.passes).toBe(2);
    expect(budget.taken).toBe(2 * pages);
    // A new run's first before-value read is made anew, however fresh the last pass.
    await drift.values(`run-before-${++runs}`, 'contacts', a);
    expect(drift.stats.passes).toBe(3);
  });
});
