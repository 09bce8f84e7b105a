import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { historyReport } from '../../src/history/index.js';
import type { RowResult } from '../../src/runs/index.js';
import { startDashboardHarness, type DashboardHarness } from '../dashboard/dashboard-fixture.js';
import { csv, resultsByRow } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Issue 41, "Also from a new user's try" ("Done when" (e)), through the CLI and the dashboard
 * against the simulator over HTTP and real Redis. Before: after `runs undo --plan` and then
 * `runs undo --wait`, the first plan could still be approved and applied (it wrote rows that
 * changed nothing, and history showed each restore twice), and two undos at the same moment
 * wrote records twice. Now an undo plan that a newer undo of the run superseded, or whose run
 * was undone since it was made, is refused at approve and at apply, saying why; two undos at
 * once restore each record once; and a planned write that changes nothing is `skipped`
 * unchanged, not sent, and not in history.
 */

let d: DashboardHarness;
beforeAll(async () => {
  d = await startDashboardHarness({ records: 120 });
  await d.h.startWorkers();
}, 60_000);
afterAll(async () => d?.close());

const cli = cliFor(() => d.h);

interface RunJson {
  id: string;
  counts: Record<string, number>;
}
interface HistoryEntry {
  runId: string;
  undoOf?: string;
  field: string;
  before: string | null;
  after: string;
}

/** A plain import of renames of `contacts`, waited for. */
async function renameRun(tag: string, contacts: Array<{ id: string }>): Promise<RunJson> {
  const file = d.h.file(
    `${tag}.csv`,
    csv(
      ['id', 'name'],
      contacts.map((c, i) => [c.id, `${tag} ${i}`]),
    ),
  );
  const imported = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--wait', '--json']);
  expect(imported.code, imported.stderr).toBe(0);
  const run = JSON.parse(imported.stdout) as RunJson;
  expect(run.counts.succeeded).toBe(contacts.length);
  return run;
}

async function historyOf(id: string): Promise<HistoryEntry[]> {
  const shown = await cli(['history', id, '-w', 'acme', '--json']);
  expect(shown.code, shown.stderr).toBe(0);
  return JSON.parse(shown.stdout) as HistoryEntry[];
}

const contactSlice = (from: number, to: number) =>
  [...d.h.ws.contacts.values()].slice(from, to).map((c) => ({ id: c.id, name: c.name }));

describe('an undo plan superseded or overtaken by another undo of its run (issue 41)', () => {
  it('runs undo --plan, then runs undo --wait: the first plan is refused at approve and apply, CLI and dashboard', async () => {
    const contacts = contactSlice(0, 20);
    const run = await renameRun('First', contacts);
    const planned = await cli(['runs', 'undo', run.id, '--plan', '--json']);
    expect(planned.code, planned.stderr).toBe(0);
    const first = (JSON.parse(planned.stdout) as { planId: string }).planId;

    const undone = await cli(['runs', 'undo', run.id, '--wait', '--json']);
    expect(undone.code, undone.stderr).toBe(0);
    const second = JSON.parse(undone.stdout) as { planId: string; run: RunJson };
    expect(second.run.counts).toMatchObject({ succeeded: 20, skipped: 0 });
    for (const c of contacts) expect(d.h.ws.contacts.get(c.id)!.name).toBe(c.name);

    const writes = d.h.ws.stats.writes.contactUpdate;
    const words = `run ${run.id} was undone since plan ${first} was made, by plan ${second.planId}`;
    const approve = await cli(['plans', 'approve', first]);
    expect(approve.code, approve.stdout).toBe(2);
    expect(approve.stderr).toContain(words);
    const apply = await cli(['apply', first, '--wait']);
    expect(apply.code, apply.stdout).toBe(2);
    expect(apply.stderr).toContain(words);
    expect(apply.stderr).toContain('Nothing was sent');

    const page = await d.post(`/plans/${first}/approve`);
    expect(page.statusCode).toBe(409);
    expect(page.body).toContain(words);
    const applied = await d.post(`/plans/${first}/apply`, {}, { accept: 'application/json' });
    expect(applied.statusCode).toBe(409);
    expect(applied.json()).toMatchObject({ error: 'PLAN_REFUSED' });
    expect(String(applied.json().message)).toContain(words);

    expect(d.h.ws.stats.writes.contactUpdate).toBe(writes);
    // Each record: the import, and one restore.
    const entries = await historyOf(contacts[4]!.id);
    expect(entries.map((e) => e.undoOf ?? 'import')).toEqual([run.id, 'import']);
  }, 240_000);

  it('of two pending undo plans of a run, the older is refused as superseded; the newer applies', async () => {
    const contacts = contactSlice(20, 30);
    const run = await renameRun('Twice', contacts);
    const older = (JSON.parse((await cli(['runs', 'undo', run.id, '--plan', '--json'])).stdout) as { planId: string })
      .planId;
    const newer = (JSON.parse((await cli(['runs', 'undo', run.id, '--plan', '--json'])).stdout) as { planId: string })
      .planId;
    const words = `plan ${older} was superseded by a newer undo of run ${run.id}, plan ${newer}`;
    const approve = await cli(['plans', 'approve', older]);
    expect(approve.code).toBe(2);
    expect(approve.stderr).toContain(words);
    const page = await d.post(`/plans/${older}/approve`);
    expect(page.statusCode).toBe(409);
    expect(page.body).toContain(words);
    const apply = await cli(['apply', older, '--wait']);
    expect(apply.code).toBe(2);
    expect(apply.stderr).toContain(words);

    const applied = await cli(['apply', newer, '--wait', '--json']);
    expect(applied.code, applied.stderr).toBe(0);
    expect((JSON.parse(applied.stdout) as RunJson).counts).toMatchObject({ succeeded: 10 });
    for (const c of contacts) expect(d.h.ws.contacts.get(c.id)!.name).toBe(c.name);
  }, 240_000);

  it('two undos of a run at the same moment: each record is restored once in history', async () => {
    const contacts = contactSlice(30, 60);
    const run = await renameRun('Race', contacts);
    const writes = d.h.ws.stats.writes.contactUpdate;
    const [a, b] = await Promise.all([
      cli(['runs', 'undo', run.id, '--wait', '--json'], { timeoutMs: 180_000 }),
      cli(['runs', 'undo', run.id, '--wait', '--json'], { timeoutMs: 180_000 }),
    ]);
    // One of them undoes the run; the other finds it undone (or being undone) and says so, or plans nothing to write.
    expect([a.code, b.code].filter((c) => c === 0).length, `${a.stderr}\n${b.stderr}`).toBeGreaterThanOrEqual(1);
    for (const r of [a, b])
      if (r.code !== 0) expect(r.stderr).toMatch(/was undone (since|meanwhile)|is being undone by|was superseded/);
    for (const c of contacts) expect(d.h.ws.contacts.get(c.id)!.name).toBe(c.name);
    expect(d.h.ws.stats.writes.contactUpdate - writes).toBe(30);
    // The CLI's history of one record, then the same reader (historyReport, which the CLI
    // calls) for all 30: a process per record cost 30 s of the suite.
    expect((await historyOf(contacts[0]!.id)).filter((e) => e.undoOf === run.id)).toHaveLength(1);
    let twice = 0;
    for (const c of contacts) {
      const { entries } = await historyReport({
        store: d.h.runtime.store,
        resultsDir: d.h.config.resultsDir,
        workspace: 'acme',
        recordId: c.id,
        history: d.h.config.history,
      });
      const restores = entries.filter((e) => e.undoOf === run.id);
      if (restores.length !== 1) twice++;
    }
    expect(twice).toBe(0);
  }, 360_000);

  it('a planned write that changes nothing ends skipped unchanged: not sent, not in history', async () => {
    const contacts = [...d.h.ws.contacts.values()].slice(60, 64);
    const phoneBefore = contacts[3]!.phone_number;
    const file = d.h.file(
      'same.csv',
      csv(
        ['id', 'name', 'phone_number'],
        contacts.map((c, i) => [c.id, `Same ${i}`, `+1555000200${i}`]),
      ),
    );
    const made = await cli(['plan', file, '--op', 'contact.update', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const { planId } = JSON.parse(made.stdout) as { planId: string };
    // A person types the planned values in: all of them in three records, the name only in the fourth.
    contacts
      .slice(0, 3)
      .forEach((c, i) => d.h.ws.updateRecord('contacts', c.id, { name: `Same ${i}`, phone_number: `+1555000200${i}` }));
    d.h.ws.updateRecord('contacts', contacts[3]!.id, { name: 'Same 3' });
    const writes = d.h.ws.stats.writes.contactUpdate;
    const applied = await cli(['apply', planId, '--wait', '--json']);
    expect(applied.code, applied.stderr).toBe(0);
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 4, succeeded: 1, skipped: 3, drifted: 0 });
    expect(d.h.ws.stats.writes.contactUpdate - writes).toBe(1);
    const results = await resultsByRow(d.h, run.id);
    for (const r of results.slice(0, 3) as RowResult[]) {
      expect(r.status).toBe('skipped');
      expect(r.message).toBe(
        'unchanged: the record already holds the name, phone_number this row writes; nothing sent',
      );
      expect(r.changes).toBeUndefined();
    }
    expect(results[3]!.changes).toEqual({ phone_number: [phoneBefore, '+15550002003'] });
    expect((await historyOf(contacts[0]!.id)).filter((e) => e.runId === run.id)).toEqual([]);
    expect((await historyOf(contacts[3]!.id)).filter((e) => e.runId === run.id).map((e) => e.field)).toEqual([
      'phone_number',
    ]);
  }, 240_000);
});
