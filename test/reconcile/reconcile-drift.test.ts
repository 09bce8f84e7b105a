import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMappingFile } from '../../src/ingest/index.js';
import type { SimContact } from '../../src/sim/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { reconcile } from './fixtures.js';

/**
 * `import --reconcile` rows get an applied plan's drift check (issue 41, item 5): a person who
 * fills in an `"if-empty"` field after the run read the CRM, while the row waits in the queue,
 * keeps their value — the row ends `drifted`, not sent. Against the simulator over HTTP with real
 * Redis and workers; the rows are held in the queue by starting the workers only after the edit.
 */
describe('import --reconcile: the drift check at send time', () => {
  let h: Harness;
  let contacts: SimContact[];
  let working: Promise<unknown> | undefined;
  const workers = () => (working ??= h.startWorkers());

  beforeAll(async () => {
    h = await startHarness({ records: 60, seed: 41 });
    contacts = [...h.ws.contacts.values()];
  });
  afterAll(async () => h?.close());

  const mapping = () =>
    readMappingFile(
      h.file(
        'if-empty.json',
        JSON.stringify({ columns: { Email: 'email', Phone: { field: 'phone_number', write: 'if-empty' } } }),
      ),
    );

  /** Contacts from..from+n-1 with no phone, and a file that fills each one's phone. */
  function emptyPhones(from: number, n: number, name: string): { rows: SimContact[]; file: string } {
    const rows = contacts.slice(from, from + n).map((c) => {
      h.ws.updateRecord('contacts', c.id, { phone_number: '' });
      return h.ws.contacts.get(c.id)!;
    });
    const file = h.file(
      name,
      csv(
        ['Email', 'Phone'],
        rows.map((c, i) => [c.email, `+1 300-555-${String(from + i).padStart(4, '0')}`]),
      ),
    );
    return { rows, file };
  }

  it("a phone a person fills in after the run's read and before its row is sent is kept: the row ends drifted", async () => {
    const { rows, file } = emptyPhones(0, 20, 'fill-phones.csv');
    h.ws.resetStats();
    // No worker yet: the run reads the CRM, plans and queues its 20 updates, which wait.
    const { run, counts } = await reconcile(h, file, {
      op: 'contact.update',
      matchKey: 'email',
      keyColumn: 'Email',
      mapping: mapping(),
    });
    expect(counts).toMatchObject({ update: 20, skip: 0 });
    expect(h.ws.stats.writes.contactUpdate).toBe(0);
    // A person fills in the phone of the first 10 (and renames one of the others: a field the
    // row does not write is no drift).
    const person = (i: number) => `+1 777-555-${String(i).padStart(4, '0')}`;
    for (const [i, c] of rows.slice(0, 10).entries()) h.ws.updateRecord('contacts', c.id, { phone_number: person(i) });
    h.ws.updateRecord('contacts', rows[15]!.id, { name: 'Renamed By A Person' });

    await workers();
    const done = await h.waitForRun(run.id);
    expect(done.counts).toMatchObject({ total: 20, drifted: 10, succeeded: 10, failed: 0 });
    // The 10 the person filled in keep the person's phone; the other 10 get the file's.
    expect(h.ws.stats.writes.contactUpdate).toBe(10);
    for (const [i, c] of rows.entries()) {
      const now = h.ws.contacts.get(c.id)!;
      expect(now.phone_number).toBe(i < 10 ? person(i) : `+1 300-555-${String(i).padStart(4, '0')}`);
    }
    expect(h.ws.contacts.get(rows[15]!.id)!.name).toBe('Renamed By A Person');
    const results = new Map((await resultsByRow(h, run.id)).map((r) => [r.row, r]));
    for (let row = 1; row <= 10; row++) {
      expect(results.get(row)).toMatchObject({ status: 'drifted', code: 'ROW_DRIFTED' });
      expect(results.get(row)!.message).toContain(`phone_number is now "${person(row - 1)}"`);
    }
    for (let row = 11; row <= 20; row++) expect(results.get(row)).toMatchObject({ status: 'succeeded' });
  });

  it('the calm path: an unchanged CRM takes every row, and each result keeps what its write replaced', async () => {
    const { rows, file } = emptyPhones(30, 20, 'calm-phones.csv');
    h.ws.resetStats();
    const { run } = await reconcile(h, file, {
      op: 'contact.update',
      matchKey: 'email',
      keyColumn: 'Email',
      mapping: mapping(),
    });
    await workers();
    const done = await h.waitForRun(run.id);
    expect(done.counts).toMatchObject({ total: 20, succeeded: 20, drifted: 0, failed: 0 });
    expect(h.ws.stats.writes.contactUpdate).toBe(20);
    for (const [i, c] of rows.entries())
      expect(h.ws.contacts.get(c.id)!.phone_number).toBe(`+1 300-555-${String(30 + i).padStart(4, '0')}`);
    const results = new Map((await resultsByRow(h, run.id)).map((r) => [r.row, r]));
    expect(results.get(1)!.changes).toEqual({ phone_number: ['', '+1 300-555-0030'] });
  });
});
