import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Issue 34's "Done when", through the CLI as a person runs it, against the simulator over HTTP
 * and real Redis: 300 contacts, a plain import of 200 renames, a person renames 10 of them, the
 * undo puts the other 190 back and leaves the 10, reported; undo of the undo; creates listed;
 * an archived run undone; `--plan` sends nothing.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 300 });
  await h.startWorkers();
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

interface RunJson {
  id: string;
  status: string;
  counts: Record<string, number>;
  options: { undoOf?: string; plan?: string };
  undoneBy?: string[];
}
interface UndoJson {
  undoOf: string;
  planId: string;
  counts: Record<string, number>;
  restores: number;
  left: Array<{ recordId: string; field: string; reason: string; now?: string; wrote: string }>;
  created: Array<{ row: number; dealId: string; fields: Record<string, string> }>;
  run?: RunJson;
}

const names = () => new Map([...h.ws.contacts.values()].map((c) => [c.id, c.name]));

describe('runs undo (issue 34)', () => {
  let importId = '';
  let undoId = '';
  const original = new Map<string, string>();
  const edited = new Map<string, string>();

  it('import 200 renames; a person renames 10; undo --wait --json puts back 190 and leaves the 10, reported', async () => {
    expect(h.ws.contacts.size).toBe(300);
    const contacts = [...h.ws.contacts.values()].slice(0, 200);
    for (const c of contacts) original.set(c.id, c.name);
    const file = h.file(
      'renames.csv',
      csv(
        ['id', 'name'],
        contacts.map((c, i) => [c.id, `Renamed ${i}`]),
      ),
    );
    const imported = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--wait', '--json']);
    expect(imported.code, imported.stderr).toBe(0);
    const run = JSON.parse(imported.stdout) as RunJson;
    importId = run.id;
    expect(run.counts.succeeded).toBe(200);

    for (const c of contacts.filter((_, i) => i % 20 === 7)) {
      h.ws.updateRecord('contacts', c.id, { name: `Person ${c.id}` });
      edited.set(c.id, `Person ${c.id}`);
    }
    expect(edited.size).toBe(10);

    const changedId = [...edited.keys()][0]!;
    const history = await cli(['history', changedId, '-w', 'acme']);
    expect(history.code, history.stderr).toBe(0);
    expect(history.stdout).toContain(importId);
    expect(history.stdout).toContain(JSON.stringify(original.get(changedId)));
    expect(history.stdout).toMatch(/"Renamed \d+"/);

    const writesBefore = h.ws.stats.writes.contactUpdate;
    const undone = await cli(['runs', 'undo', importId, '--wait', '--json']);
    expect(undone.code, undone.stderr).toBe(0);
    const report = JSON.parse(undone.stdout) as UndoJson;
    undoId = report.run!.id;
    expect(report.undoOf).toBe(importId);
    expect(report.run!.options.undoOf).toBe(importId);
    expect(report.run!.counts).toMatchObject({ total: 200, succeeded: 190, skipped: 10, failed: 0, drifted: 0 });
    expect(h.ws.stats.writes.contactUpdate - writesBefore).toBe(190);
    expect(report.left).toHaveLength(10);
    for (const l of report.left) {
      expect(l.reason).toBe('changed since the run');
      expect(l.now).toBe(edited.get(l.recordId));
    }
    const now = names();
    for (const [id, name] of original) expect(now.get(id), id).toBe(edited.get(id) ?? name);

    const shown = await cli(['runs', 'show', importId, '--json']);
    expect((JSON.parse(shown.stdout) as { run: RunJson }).run.undoneBy).toEqual([undoId]);
    const skipped = await cli(['runs', 'export', undoId, '--out', '-']);
    expect(skipped.stdout.match(/changed since the run/g)).toHaveLength(10);
  }, 300_000);

  it("undo of the undo writes the run's values again, and leaves the person's edits", async () => {
    const redo = await cli(['runs', 'undo', undoId, '--wait', '--json']);
    expect(redo.code, redo.stderr).toBe(0);
    const report = JSON.parse(redo.stdout) as UndoJson;
    expect(report.run!.counts).toMatchObject({ succeeded: 190, failed: 0 });
    const now = names();
    const contacts = [...original.keys()];
    contacts.forEach((id, i) => expect(now.get(id), id).toBe(edited.get(id) ?? `Renamed ${i}`));

    const history = await cli(['history', contacts[0]!, '-w', 'acme', '--json']);
    const entries = JSON.parse(history.stdout) as Array<{
      runId: string;
      field: string;
      before: string;
      after: string;
    }>;
    // Newest first: the redo, the undo, the import.
    expect(entries.map((e) => e.runId)).toEqual([report.run!.id, undoId, importId]);
    expect(entries[0]).toMatchObject({ field: 'name', before: original.get(contacts[0]!), after: 'Renamed 0' });
  }, 300_000);

  it('undo of a run that created deals lists them; --plan sends nothing', async () => {
    const file = h.file(
      'creates.csv',
      csv(
        ['name', 'value'],
        [
          ['Undo deal one', 5],
          ['Undo deal two', 6],
        ],
      ),
    );
    const imported = await cli(['import', file, '--op', 'deal.create', '-w', 'acme', '--wait', '--json']);
    const run = JSON.parse(imported.stdout) as RunJson;
    const requests = h.ws.stats.requests;
    const planned = await cli(['runs', 'undo', run.id, '--plan', '--json']);
    expect(planned.code, planned.stderr).toBe(0);
    const report = JSON.parse(planned.stdout) as UndoJson;
    expect(report.run).toBeUndefined();
    expect(report.counts).toMatchObject({ update: 0, skip: 2 });
    expect(report.created.map((c) => c.fields.name)).toEqual(['Undo deal one', 'Undo deal two']);
    for (const c of report.created) expect(h.ws.deals.has(c.dealId)).toBe(true);
    expect(h.ws.stats.requests).toBe(requests); // no update to undo: not even a list read
    const text = await cli(['runs', 'undo', run.id, '--plan']);
    expect(text.stdout).toMatch(/2 deals the run created \(the API has no delete/);
  }, 300_000);

  it('undoes an archived run', async () => {
    const contacts = [...h.ws.contacts.values()].slice(250, 260);
    const before = contacts.map((c) => c.name);
    const file = h.file(
      'archived.csv',
      csv(
        ['id', 'name'],
        contacts.map((c, i) => [c.id, `Archived ${i}`]),
      ),
    );
    const run = JSON.parse(
      (await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--wait', '--json'])).stdout,
    ) as RunJson;
    const deleted = await cli(['runs', 'delete', run.id]);
    expect(deleted.code, deleted.stderr).toBe(0);
    const undone = await cli(['runs', 'undo', run.id, '--wait', '--json']);
    expect(undone.code, undone.stderr).toBe(0);
    const undo = (JSON.parse(undone.stdout) as UndoJson).run!;
    expect(undo.counts).toMatchObject({ succeeded: 10 });
    contacts.forEach((c, i) => expect(h.ws.contacts.get(c.id)!.name).toBe(before[i]));
    // The archived run names its undo run, as a run in Redis does; its results are intact.
    const shown = await cli(['runs', 'show', run.id, '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    const archived = JSON.parse(shown.stdout) as { run: RunJson; archived?: string };
    expect(archived.archived).toBeDefined();
    expect(archived.run.undoneBy).toEqual([undo.id]);
    const exported = await cli(['runs', 'export', run.id, '--out', '-']);
    expect(exported.stdout.trim().split('\n')).toHaveLength(11);
  }, 300_000);
});
