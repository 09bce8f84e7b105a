import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RowResult } from '../../src/runs/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Issue 34, what happens between an undo's plan and its write, through the CLI against the
 * simulator over HTTP and real Redis: a record a person edits after the undo was planned is left
 * alone and its row ends `skipped` "changed since the run" naming the value now (not `drifted`,
 * as a normal apply's row does); `verify` checks an undo run's rows against what they put back;
 * a row with another field changed puts none back, and undoing the run again puts the rest back;
 * `runs undo` of an unknown run says where runs are listed.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 60 });
  await h.startWorkers();
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

interface RunJson {
  id: string;
  counts: Record<string, number>;
  options: { undoOf?: string };
}
interface VerifyJson {
  checked: number;
  matching: number;
  drifted: number;
  missing: number;
  byField: Record<string, number>;
}

describe("an undo run writes only what still holds the run's values (issue 34)", () => {
  let undoId = '';
  const contacts = () => [...h.ws.contacts.values()].slice(0, 20);
  const original = new Map<string, string>();

  it("a record a person edits between the undo's plan and its write ends skipped, not drifted", async () => {
    for (const c of contacts()) original.set(c.id, c.name);
    const file = h.file(
      'renames.csv',
      csv(
        ['id', 'name'],
        contacts().map((c, i) => [c.id, `Renamed ${i}`]),
      ),
    );
    const imported = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--wait', '--json']);
    expect(imported.code, imported.stderr).toBe(0);
    const run = JSON.parse(imported.stdout) as RunJson;
    expect(run.counts.succeeded).toBe(20);

    const planned = await cli(['runs', 'undo', run.id, '--plan', '--json']);
    expect(planned.code, planned.stderr).toBe(0);
    const { planId, restores } = JSON.parse(planned.stdout) as { planId: string; restores: number };
    expect(restores).toBe(20);

    // After the undo read the CRM (its plan), before it writes: a person renames one record.
    const edited = contacts()[3]!;
    h.ws.updateRecord('contacts', edited.id, { name: 'Person three' });
    const writes = h.ws.stats.writes.contactUpdate;
    const applied = await cli(['apply', planId, '--wait', '--json']);
    expect(applied.code, applied.stderr).toBe(0);
    const undo = JSON.parse(applied.stdout) as RunJson;
    undoId = undo.id;
    expect(undo.options.undoOf).toBe(run.id);
    expect(undo.counts).toMatchObject({ total: 20, succeeded: 19, skipped: 1, drifted: 0, failed: 0 });
    expect(h.ws.stats.writes.contactUpdate - writes).toBe(19);

    const results = await resultsByRow(h, undoId);
    const left = results.filter((r: RowResult) => r.status === 'skipped');
    expect(left.map((r) => r.recordId)).toEqual([edited.id]);
    expect(left[0]!.message).toBe(
      'not put back: name changed since the run: it is now "Person three" (the run wrote "Renamed 3")',
    );
    for (const c of contacts())
      expect(h.ws.contacts.get(c.id)!.name, c.id).toBe(c.id === edited.id ? 'Person three' : original.get(c.id));
    const exported = await cli(['runs', 'export', undoId, '--out', '-']);
    expect(exported.stdout.match(/changed since the run/g)).toHaveLength(1);
  }, 120_000);

  it('a normal apply of a plan still ends such a row drifted', async () => {
    const some = contacts().slice(10, 12);
    const file = h.file(
      'plan.csv',
      csv(
        ['id', 'name'],
        some.map((c, i) => [c.id, `Planned ${i}`]),
      ),
    );
    const made = await cli(['plan', file, '--op', 'contact.update', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const { planId } = JSON.parse(made.stdout) as { planId: string };
    h.ws.updateRecord('contacts', some[0]!.id, { name: 'Person ten' });
    const applied = await cli(['apply', planId, '--wait', '--json']);
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ succeeded: 1, drifted: 1, skipped: 0 });
    // Put the two back as the undo left them, for the verify below.
    h.ws.updateRecord('contacts', some[0]!.id, { name: original.get(some[0]!.id)! });
    h.ws.updateRecord('contacts', some[1]!.id, { name: original.get(some[1]!.id)! });
  }, 120_000);

  it('verify of an undo run checks what it put back', async () => {
    const clean = await cli(['verify', undoId, '--json']);
    expect(clean.code, clean.stderr).toBe(0);
    expect(JSON.parse(clean.stdout) as VerifyJson).toMatchObject({ checked: 19, matching: 19, drifted: 0, missing: 0 });

    const changed = contacts()[5]!;
    h.ws.updateRecord('contacts', changed.id, { name: 'Person five' });
    const after = await cli(['verify', undoId, '--json', '--out', '-']);
    expect(after.code).toBe(1);
    const report = JSON.parse(after.stderr) as VerifyJson;
    expect(report).toMatchObject({ checked: 19, matching: 18, drifted: 1, byField: { name: 1 } });
    const line = after.stdout.split('\n').find((l) => l.includes(changed.id));
    expect(line).toMatch(/,name,.*,Person five$/);
  }, 120_000);

  it("a row's other fields are not put back with a changed one; undoing the run again puts them back", async () => {
    const pair = [...h.ws.contacts.values()].slice(40, 42);
    const before = pair.map((c) => ({ name: c.name, phone: c.phone_number }));
    const file = h.file(
      'two-fields.csv',
      csv(
        ['id', 'name', 'phone_number'],
        pair.map((c, i) => [c.id, `Two ${i}`, `+1555000100${i}`]),
      ),
    );
    const imported = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--wait', '--json']);
    const run = JSON.parse(imported.stdout) as RunJson;
    expect(run.counts.succeeded).toBe(2);
    const planned = await cli(['runs', 'undo', run.id, '--plan', '--json']);
    const { planId } = JSON.parse(planned.stdout) as { planId: string };
    h.ws.updateRecord('contacts', pair[0]!.id, { phone_number: '+15559990000' });
    const applied = await cli(['apply', planId, '--wait', '--json']);
    const undo = JSON.parse(applied.stdout) as RunJson;
    expect(undo.counts).toMatchObject({ succeeded: 1, skipped: 1 });
    const left = (await resultsByRow(h, undo.id)).find((r) => r.status === 'skipped')!;
    expect(left.message).toBe(
      'not put back: phone_number changed since the run: it is now "+15559990000" (the run wrote "+15550001000"); ' +
        'name not put back with it (one request writes the row): undo the run again to put it back',
    );
    expect(h.ws.contacts.get(pair[0]!.id)).toMatchObject({ name: 'Two 0', phone_number: '+15559990000' });
    expect(h.ws.contacts.get(pair[1]!.id)).toMatchObject({ name: before[1]!.name, phone_number: before[1]!.phone });

    const again = await cli(['runs', 'undo', run.id, '--wait', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(h.ws.contacts.get(pair[0]!.id)).toMatchObject({ name: before[0]!.name, phone_number: '+15559990000' });
  }, 120_000);

  it('runs undo of an unknown run says where runs are listed', async () => {
    const missing = await cli(['runs', 'undo', 'nope-123']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('no run with id nope-123 in Redis or archived under');
    expect(missing.stderr).toContain('list the runs with: crm-sync runs list');
    expect(missing.stderr).toContain('[RUN_NOT_FOUND]');
  }, 60_000);
});
