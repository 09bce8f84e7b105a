import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RowResult } from '../../src/runs/index.js';
import { loadDefinitions, runSync, type SyncDefinition } from '../../src/schedule/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';
import { writes } from '../reconcile/fixtures.js';

/*
 * Issue 41 items 1 and 2, against the simulator over HTTP with real workers and Redis: a deal's
 * name rides along with every update (the API requires it), so it is the field most easily
 * written without anyone asking. (a) A name the mapping marks `"write": "never"` is the CRM's on
 * every path that writes — plan + apply, a held sync tick approved and applied, a tick applied at
 * once (planned, and reconciled), `import --reconcile` — and a plain import refuses the mapping.
 * (b) A name sent unchanged with a value change is held to the CRM's name by apply's drift check:
 * a person's rename between plan and apply ends the row `drifted` with the person's name kept,
 * also for an undo plan's apply; `runs retry` re-plans it over the person's name. What the
 * results (history, undo) record is exactly the fields changed.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 120, seed: 41 });
  await h.startWorkers();
  mkdirSync(join(h.dir, 'jobs'));
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

/** A deal as it was before a test wrote anything (copied: the simulator edits its records in place). */
interface Was {
  id: string;
  name: string;
  value: number;
}

let taken = 0;
/** `n` deals no other test of this file touches, as they are now. */
function takeDeals(n: number): Was[] {
  const deals = [...h.ws.deals.values()].slice(taken, taken + n);
  taken += n;
  expect(deals).toHaveLength(n);
  return deals.map((d) => ({ id: d.id, name: d.name, value: d.value }));
}

const newValue = (i: number) => 50_000 + i;
const nameNow = (id: string) => h.ws.deals.get(id)!.name;
const valueNow = (id: string) => h.ws.deals.get(id)!.value;

interface RunJson {
  id: string;
  counts: Record<string, number>;
}

/** A mapping keeping the CRM's deal names, and a file giving each deal another name and a new value. */
function neverFiles(tag: string, deals: readonly Was[]): { mapping: string; file: string } {
  const mapping = h.file(
    `${tag}-mapping.json`,
    JSON.stringify({
      columns: { id: 'id', Deal: { field: 'name', write: 'never' }, Amount: { field: 'value', type: 'number' } },
    }),
  );
  const file = h.file(
    `${tag}.csv`,
    csv(
      ['id', 'Deal', 'Amount'],
      deals.map((d, i) => [d.id, `File name ${tag} ${i}`, newValue(i)]),
    ),
  );
  return { mapping, file };
}

/** Every deal keeps its name and has its new value; each row's result records the value change only. */
async function expectNamesKept(runId: string, deals: readonly Was[]): Promise<void> {
  const overwritten = deals.filter((d) => nameNow(d.id) !== d.name);
  expect(overwritten.map((d) => `${d.id}: ${d.name} -> ${nameNow(d.id)}`)).toEqual([]);
  for (const [i, d] of deals.entries()) expect(valueNow(d.id), d.id).toBe(newValue(i));
  const results = await resultsByRow(h, runId);
  expect(results.map((r) => r.status)).toEqual(deals.map(() => 'succeeded'));
  for (const r of results) {
    const d = deals.find((x) => x.id === r.recordId)!;
    expect(r.changes, `row ${r.row}`).toEqual({ value: [String(d.value), String(newValue(r.row - 1))] });
  }
}

/** A nightly sync of deal.update from `file` (relative to the jobs directory) with `mapping`. */
function defineSync(name: string, file: string, mapping: string, extra: Record<string, unknown>): SyncDefinition {
  const jobs = join(h.dir, 'jobs');
  writeFileSync(
    join(jobs, `${name}.json`),
    JSON.stringify({
      name,
      workspace: 'acme',
      operation: 'deal.update',
      source: `../${file.slice(h.dir.length + 1)}`,
      mapping: `../${mapping.slice(h.dir.length + 1)}`,
      schedule: { cron: '0 2 * * *' },
      ...extra,
    }),
  );
  return loadDefinitions(jobs).find((d) => d.name === name)!;
}

describe('(a) a deal name with "write": "never" is never written (issue 41, item 1)', () => {
  it('plan + apply: the plan says the CRM name is kept, and apply sends the CRM name', async () => {
    const deals = takeDeals(6);
    const { mapping, file } = neverFiles('plan', deals);
    const out = join(h.dir, 'never-plan.csv');
    const made = await cli(['plan', file, '--op', 'deal.update', '-w', 'acme', '-m', mapping, '-o', out, '--json']);
    expect(made.code, made.stderr).toBe(0);
    const { planId } = JSON.parse(made.stdout) as { planId: string };
    // What a person reviews: the CRM name kept, the file's held back.
    const lines = parse(readFileSync(out, 'utf8'), { columns: true }) as Array<Record<string, string>>;
    expect(lines.map((l) => l.held_back)).toEqual(
      deals.map((d, i) => `name: keeps ${d.name}, not File name plan ${i} ("write": "never")`),
    );
    const shown = await cli(['plans', 'show', planId, '--json']);
    const rows = (JSON.parse(shown.stdout) as { rows: Array<{ recordId: string; fields: Record<string, unknown> }> })
      .rows;
    // The stored row sends the CRM's name, not the file's.
    for (const r of rows) expect(r.fields.name, r.recordId).toBe(deals.find((d) => d.id === r.recordId)!.name);

    const applied = await cli(['apply', planId, '--wait', '--json']);
    expect(applied.code, applied.stderr).toBe(0);
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 6, succeeded: 6, drifted: 0 });
    await expectNamesKept(run.id, deals);
  }, 120_000);

  it('import --reconcile sends the CRM name', async () => {
    const deals = takeDeals(6);
    const { mapping, file } = neverFiles('reconciled', deals);
    const done = await cli(
      ['import', file, '--op', 'deal.update', '-w', 'acme', '-m', mapping, '--reconcile', '--wait', '--json'],
      { timeoutMs: 90_000 },
    );
    expect(done.code, done.stderr).toBe(0);
    const run = JSON.parse(done.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 6, succeeded: 6 });
    await expectNamesKept(run.id, deals);
  }, 120_000);

  it('a held sync tick, approved and applied, sends the CRM name', async () => {
    const deals = takeDeals(6);
    const { mapping, file } = neverFiles('held-tick', deals);
    const def = defineSync('held-names', file, mapping, { approval: 'always' });
    const before = writes(h);
    const summary = await runSync(def, { runtime: h.runtime });
    const planId = summary.held?.planId;
    expect(planId).toMatch(/^plan-/);
    expect(writes(h)).toBe(before);
    expect((await cli(['plans', 'approve', planId!])).code).toBe(0);
    const applied = await cli(['apply', planId!, '--wait', '--json']);
    expect(applied.code, applied.stderr).toBe(0);
    await expectNamesKept((JSON.parse(applied.stdout) as RunJson).id, deals);
  }, 120_000);

  it('a guarded tick within its guard, applied at once from its plan, sends the CRM name', async () => {
    const deals = takeDeals(6);
    const { mapping, file } = neverFiles('guarded-tick', deals);
    const def = defineSync('guarded-names', file, mapping, { guard: { maxChangedShare: 1 } });
    const summary = await runSync(def, { runtime: h.runtime });
    expect(summary.held).toBeUndefined();
    expect(summary.planId).toMatch(/^plan-/);
    await h.waitForRun(summary.runId, 60_000);
    await expectNamesKept(summary.runId, deals);
  }, 120_000);

  it('an unguarded tick (a reconciled run) sends the CRM name', async () => {
    const deals = takeDeals(6);
    const { mapping, file } = neverFiles('plain-tick', deals);
    const def = defineSync('plain-names', file, mapping, {});
    const summary = await runSync(def, { runtime: h.runtime });
    expect(summary.planId).toBeUndefined();
    await h.waitForRun(summary.runId, 60_000);
    await expectNamesKept(summary.runId, deals);
  }, 120_000);

  it('a plain import refuses the mapping before a run exists: it cannot know the CRM name', async () => {
    const deals = takeDeals(2);
    const { mapping, file } = neverFiles('plain-import', deals);
    const before = writes(h);
    const refused = await cli(['import', file, '--op', 'deal.update', '-w', 'acme', '-m', mapping, '--wait']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('requires a name on every deal update');
    expect(writes(h)).toBe(before);
    for (const d of deals) expect(h.ws.deals.get(d.id)).toMatchObject({ name: d.name, value: d.value });
  }, 60_000);
});

describe("(b) a deal's name sent unchanged is held to the CRM's by the drift check (issue 41, item 2)", () => {
  /** A file of value changes whose name column holds each deal's current name. */
  const valueFile = (tag: string, deals: readonly Was[]) =>
    h.file(
      `${tag}.csv`,
      csv(
        ['id', 'name', 'value'],
        deals.map((d, i) => [d.id, d.name, newValue(i)]),
      ),
    );
  const renamed = (d: Was) => `Person renamed ${d.id}`;

  it("a person's rename between plan and apply: the row drifts, the person's name stays; retry re-plans over it", async () => {
    const deals = takeDeals(10);
    const made = await cli(['plan', valueFile('values', deals), '--op', 'deal.update', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const { planId, counts } = JSON.parse(made.stdout) as { planId: string; counts: Record<string, number> };
    expect(counts).toMatchObject({ update: 10 });

    const edited = deals.filter((_, i) => i % 3 === 1);
    for (const d of edited) h.ws.updateRecord('deals', d.id, { name: renamed(d) });
    const applied = await cli(['apply', planId, '--wait', '--json']);
    // Drifted rows need a person: exit 1.
    expect(applied.code, applied.stderr).toBe(1);
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 10, succeeded: 7, drifted: 3, failed: 0 });
    for (const [i, d] of deals.entries()) {
      if (edited.includes(d)) expect(h.ws.deals.get(d.id)).toMatchObject({ name: renamed(d), value: d.value });
      else expect(h.ws.deals.get(d.id)).toMatchObject({ name: d.name, value: newValue(i) });
    }
    const results = await resultsByRow(h, run.id);
    for (const r of results) {
      const i = r.row - 1;
      const d = deals[i]!;
      if (edited.includes(d)) {
        expect(r.status).toBe('drifted');
        expect(r.message).toBe(
          `not sent: the record changed since the plan: name is now ${JSON.stringify(renamed(d))} in the CRM (planned unchanged at ${JSON.stringify(d.name)})`,
        );
      } else {
        // The calm rows: history keeps exactly the value change, no name.
        expect(r.status).toBe('succeeded');
        expect(r.changes).toEqual({ value: [String(d.value), String(newValue(i))] });
      }
    }
    const calm = deals[0]!;
    const history = await cli(['history', calm.id, '-w', 'acme', '--json']);
    expect(history.code, history.stderr).toBe(0);
    const entries = JSON.parse(history.stdout) as Array<{ field: string; before: string; after: string }>;
    expect(entries.map((e) => [e.field, e.before, e.after])).toEqual([
      ['value', String(calm.value), String(newValue(0))],
    ]);

    // runs retry re-plans the drifted rows over the CRM's names now (the person's); applied, it
    // writes the values and keeps those names.
    const retried = await cli(['runs', 'retry', run.id]);
    expect(retried.code, retried.stderr).toBe(0);
    const replanned = /re-planned .*: plan (plan-\S+): /.exec(retried.stdout)?.[1];
    expect(replanned, retried.stdout).toBeDefined();
    const shown = await cli(['plans', 'show', replanned!, '--json']);
    const rows = (JSON.parse(shown.stdout) as { rows: Array<{ recordId: string; fields: Record<string, unknown> }> })
      .rows;
    expect(rows.map((r) => r.fields.name).sort()).toEqual(edited.map(renamed).sort());
    const again = await cli(['apply', replanned!, '--wait', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect((JSON.parse(again.stdout) as RunJson).counts).toMatchObject({ total: 3, succeeded: 3, drifted: 0 });
    for (const d of edited)
      expect(h.ws.deals.get(d.id)).toMatchObject({ name: renamed(d), value: newValue(deals.indexOf(d)) });
  }, 180_000);

  it("an undo plan's apply: a deal renamed since the undo's plan drifts, the person's name stays", async () => {
    const deals = takeDeals(10);
    const imported = await cli([
      'import',
      valueFile('undo-values', deals),
      '--op',
      'deal.update',
      '-w',
      'acme',
      '--wait',
      '--json',
    ]);
    expect(imported.code, imported.stderr).toBe(0);
    const run = JSON.parse(imported.stdout) as RunJson;
    expect(run.counts.succeeded).toBe(10);
    for (const r of await resultsByRow(h, run.id))
      expect(r.changes).toEqual({ value: [String(deals[r.row - 1]!.value), String(newValue(r.row - 1))] });

    const planned = await cli(['runs', 'undo', run.id, '--plan', '--json']);
    expect(planned.code, planned.stderr).toBe(0);
    const { planId, restores } = JSON.parse(planned.stdout) as { planId: string; restores: number };
    expect(restores).toBe(10);
    const edited = deals.filter((_, i) => i % 3 === 2);
    for (const d of edited) h.ws.updateRecord('deals', d.id, { name: renamed(d) });
    const applied = await cli(['apply', planId, '--wait', '--json']);
    expect(applied.code).toBe(1);
    const undo = JSON.parse(applied.stdout) as RunJson;
    expect(undo.counts).toMatchObject({ total: 10, succeeded: 7, drifted: 3, skipped: 0, failed: 0 });
    for (const [i, d] of deals.entries()) {
      // Renamed: the person's name, and the run's value (not put back). The rest: put back whole.
      if (edited.includes(d)) expect(h.ws.deals.get(d.id)).toMatchObject({ name: renamed(d), value: newValue(i) });
      else expect(h.ws.deals.get(d.id)).toMatchObject({ name: d.name, value: d.value });
    }
    const byRecord = new Map((await resultsByRow(h, undo.id)).map((r: RowResult) => [r.recordId, r]));
    for (const [i, d] of deals.entries()) {
      const r = byRecord.get(d.id)!;
      if (edited.includes(d)) {
        expect(r.status).toBe('drifted');
        expect(r.message).toContain(`name is now ${JSON.stringify(renamed(d))} in the CRM`);
      } else {
        expect(r.status).toBe('succeeded');
        expect(r.changes).toEqual({ value: [String(newValue(i)), String(d.value)] });
      }
    }
  }, 180_000);
});
