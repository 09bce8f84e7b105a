import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { writeResultsCsv } from '../../src/runs/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { reconcile } from '../reconcile/fixtures.js';

/*
 * Issue 34 item 1: a succeeded row keeps, per field it changed, the CRM's value before and the
 * value written — against the simulator over HTTP. A plain import reads the before-values from
 * list pages (shared passes in the budget, never a GET per row); a reconciled run keeps what its
 * planner read; a create keeps its deal and the fields it sent.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 300 });
  await h.startWorkers();
});
afterAll(async () => h?.close());

describe('before and after kept with each write (issue 34, item 1)', () => {
  it('a plain import of 200 renames keeps each old name, read in one list pass (not a GET per row)', async () => {
    const contacts = [...h.ws.contacts.values()].slice(0, 200);
    const old = new Map(contacts.map((c) => [c.id, c.name]));
    const file = h.file(
      'renames.csv',
      csv(
        ['id', 'name'],
        contacts.map((c, i) => [c.id, `Renamed ${i}`]),
      ),
    );
    const pagesBefore = h.ws.stats.listPages;
    const run = await h.waitForRun((await h.importFile(file, 'contact.update')).id, 60_000);
    expect(run.counts.succeeded).toBe(200);
    const listPages = h.ws.stats.listPages - pagesBefore;
    // 300 contacts: one pass is 3 full pages and the closing empty one (answered 200 too).
    expect(listPages).toBeGreaterThan(0);
    expect(listPages).toBeLessThanOrEqual(4);
    console.log(`plain import of 200 rows over 300 contacts: ${listPages} list requests`);
    const results = await resultsByRow(h, run.id);
    for (const r of results) {
      const i = r.row - 1;
      expect(r.changes, `row ${r.row}`).toEqual({ name: [old.get(contacts[i]!.id), `Renamed ${i}`] });
    }

    let text = '';
    const out = new Writable({
      write(chunk: Buffer, _e, done) {
        text += chunk.toString();
        done();
      },
    });
    await writeResultsCsv(h.runtime.store, run.id, out);
    const [header, first] = text.split('\n');
    expect(header).toContain('crm_sync_before,crm_sync_after');
    const cell = (v: unknown) => `"${JSON.stringify(v).replaceAll('"', '""')}"`;
    expect(first).toContain(`${cell({ name: old.get(contacts[0]!.id) })},${cell({ name: 'Renamed 0' })}`);
  });

  it('an unchanged field is not kept; a reconciled run keeps what its planner read', async () => {
    const contacts = [...h.ws.contacts.values()].slice(200, 210);
    const file = h.file(
      'reconciled.csv',
      csv(
        ['id', 'name', 'email'],
        contacts.map((c, i) => [c.id, `Reconciled ${i}`, c.email ?? '']),
      ),
    );
    const old = contacts.map((c) => c.name);
    const { run: started } = await reconcile(h, file, { op: 'contact.update', matchKey: 'id' });
    const run = await h.waitForRun(started.id, 60_000);
    expect(run.counts.succeeded).toBe(10);
    for (const r of await resultsByRow(h, run.id))
      expect(r.changes, `row ${r.row}`).toEqual({ name: [old[r.row - 1], `Reconciled ${r.row - 1}`] });
  });

  it('a create keeps its deal and every field it sent, before unknown', async () => {
    const file = h.file(
      'creates.csv',
      csv(
        ['name', 'value'],
        [
          ['Undo create A', 11],
          ['Undo create B', 12],
        ],
      ),
    );
    const run = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 60_000);
    expect(run.counts.succeeded).toBe(2);
    const results = await resultsByRow(h, run.id);
    expect(results.map((r) => r.changes)).toEqual([
      { name: [null, 'Undo create A'], value: [null, '11'] },
      { name: [null, 'Undo create B'], value: [null, '12'] },
    ]);
    for (const r of results) expect(h.ws.deals.has(r.recordId!)).toBe(true);
  });
});
