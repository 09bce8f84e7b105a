import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMapping } from '../../src/ingest/index.js';
import { silentLogger } from '../../src/log/index.js';
import { planReconcile, sameCanonical } from '../../src/reconcile/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import type { SimContact } from '../../src/sim/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { reconcile, writes } from './fixtures.js';

/** The address with its local part upper-cased (the simulator keeps a local part's case, lowers a domain's). */
const shout = (email: string) => {
  const at = email.lastIndexOf('@');
  return email.slice(0, at).toUpperCase() + email.slice(at);
};

/**
 * Issue 46, item 5: `--match email` matches case-insensitively, and deciding whether a row
 * changes a contact compares its email the same way (the CRM treats both spellings as one
 * address) — unless the mapping column says `"compare": "exact"`. Against the simulator over
 * HTTP, with real workers; requests counted at the simulator.
 */
describe('email case', () => {
  let h: Harness;
  let contacts: SimContact[];

  beforeAll(async () => {
    h = await startHarness({ records: 30, seed: 46 });
    await h.startWorkers();
    contacts = [...h.ws.contacts.values()];
  });
  afterAll(async () => h?.close());

  /** Contacts 0..3 with lower-case addresses; rows 0..2 re-case them, row 3 changes the phone only. */
  function caseFile(name: string): { file: string; mixed: SimContact[]; phoned: SimContact } {
    const picked = contacts.slice(0, 4).map((c, i) => {
      h.ws.updateRecord('contacts', c.id, { email: `case.${i}.${c.id}@example.com`, phone_number: '+1 200-555-0100' });
      return { ...h.ws.contacts.get(c.id)! };
    });
    const mixed = picked.slice(0, 3);
    const phoned = picked[3]!;
    const file = h.file(
      name,
      csv(
        ['Email', 'Phone'],
        [...mixed.map((c) => [shout(c.email), c.phone_number]), [shout(phoned.email), '+1 300-555-0199']],
      ),
    );
    return { file, mixed, phoned };
  }

  /** A mapping as a file gives it: parsed, and its raw document (a run stores it). */
  function mappingOf(raw: unknown) {
    return { mapping: parseMapping(raw, 'm'), raw };
  }

  async function plan(file: string, mapping: ReturnType<typeof mappingOf>) {
    const client = createCrmClient(h.config, 'acme', silentLogger);
    try {
      return await planReconcile({ file, op: 'contact.update', workspace: 'acme', client, matchKey: 'email', mapping });
    } finally {
      client.close();
    }
  }

  it('one decision of "unchanged": an email\'s case counts only under "exact"; other text keeps its case', () => {
    expect(sameCanonical('email', 'Dara.Kim@x.example', 'dara.kim@x.example')).toBe(true);
    expect(sameCanonical('email', 'Dara.Kim@x.example', 'dara.kim@x.example', 'exact')).toBe(false);
    expect(sameCanonical('email', 'dara@x.example', 'kim@x.example')).toBe(false);
    expect(sameCanonical('name', 'Dara Kim', 'DARA KIM')).toBe(false);
  });

  it('emails differing only in case are unchanged and sent nothing; a real change in the same file still goes', async () => {
    const { file, mixed, phoned } = caseFile('case-crm.csv');
    const mapping = mappingOf({ columns: { Email: 'email', Phone: 'phone_number' } });

    h.ws.resetStats();
    const planned = await plan(file, mapping);
    expect(planned.counts).toMatchObject({ update: 1, skip: 3, invalid: 0, 'not-found': 0 });
    expect(planned.summary.changed).toEqual({ phone_number: 1 });
    expect(writes(h)).toBe(0);

    h.ws.resetStats();
    const run = await reconcile(h, file, { op: 'contact.update', matchKey: 'email', mapping });
    expect(run.counts).toMatchObject({ update: 1, skip: 3 });
    expect((await h.waitForRun(run.run.id)).counts).toMatchObject({ total: 4, succeeded: 1, skipped: 3, failed: 0 });
    expect(writes(h)).toBe(1);
    expect(h.ws.stats.writes.contactUpdate).toBe(1);
    for (const c of mixed) expect(h.ws.contacts.get(c.id)!.email).toBe(c.email);
    // The row that changed its phone sends its email as the file has it: one address either way.
    expect(h.ws.contacts.get(phoned.id)!.phone_number).toBe('+1 300-555-0199');
  });

  it('with "compare": "exact" the case-only rows are planned as changes and written', async () => {
    const { file, mixed, phoned } = caseFile('case-exact.csv');
    const mapping = mappingOf({ columns: { Email: { field: 'email', compare: 'exact' }, Phone: 'phone_number' } });

    h.ws.resetStats();
    const planned = await plan(file, mapping);
    expect(planned.counts).toMatchObject({ update: 4, skip: 0, invalid: 0 });
    expect(planned.summary.changed).toEqual({ email: 4, phone_number: 1 });
    expect(writes(h)).toBe(0);

    h.ws.resetStats();
    const run = await reconcile(h, file, { op: 'contact.update', matchKey: 'email', mapping });
    expect(run.counts).toMatchObject({ update: 4, skip: 0 });
    expect((await h.waitForRun(run.run.id)).counts).toMatchObject({ total: 4, succeeded: 4, failed: 0 });
    expect(h.ws.stats.writes.contactUpdate).toBe(4);
    for (const c of [...mixed, phoned]) expect(h.ws.contacts.get(c.id)!.email).toBe(shout(c.email));
    expect(h.ws.contacts.get(phoned.id)!.phone_number).toBe('+1 300-555-0199');
  });
});
