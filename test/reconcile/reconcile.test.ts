import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunKeys } from '../../src/keys/index.js';
import { silentLogger } from '../../src/log/index.js';
import { planReconcile, verifyRun } from '../../src/reconcile/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import type { SimContact } from '../../src/sim/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { contactsCsv, reconcile, writes } from './fixtures.js';

async function collect(stream: PassThrough): Promise<string> {
  stream.end();
  let text = '';
  for await (const chunk of stream) text += String(chunk);
  return text;
}

describe('reconcile against the simulator', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ records: 120, seed: 11 });
    await h.startWorkers();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('matches rows without ids by email, sends only changed rows, and sends nothing the second time', async () => {
    const { text, changed } = contactsCsv(h, (i) => i % 10 === 3);
    expect(changed).toBe(12);
    const file = h.file('contacts-sync.csv', text);
    h.ws.resetStats();

    const first = await reconcile(h, file, { op: 'contact.update', matchKey: 'email' });
    const done = await h.waitForRun(first.run.id);
    expect(first.counts).toMatchObject({ update: 12, skip: 108, 'not-found': 0, ambiguous: 0, invalid: 0 });
    expect(done.counts).toMatchObject({ total: 120, succeeded: 12, skipped: 108, failed: 0 });
    expect(h.ws.stats.writes.contactUpdate).toBe(12);
    // Exactly the changed rows were written: the CRM now holds the file's phones.
    const byEmail = new Map([...h.ws.contacts.values()].map((c) => [c.email, c]));
    expect([...byEmail.values()].filter((c) => c.phone_number.startsWith('+1 999-555-')).length).toBe(12);
    expect(first.index.pages).toBe(2); // 120 records at 100 per page: page 2's answer says it is the last

    h.ws.resetStats();
    const second = await reconcile(h, file, { op: 'contact.update', matchKey: 'email' });
    const again = await h.waitForRun(second.run.id);
    expect(writes(h)).toBe(0);
    expect(again.counts).toMatchObject({ total: 120, skipped: 120, succeeded: 0, failed: 0 });
    const results = await resultsByRow(h, second.run.id);
    expect(
      results.every((r) => r.status === 'skipped' && r.message === 'unchanged' && r.recordId?.startsWith('con_')),
    ).toBe(true);
  });

  it('compares normalised values: case-insensitive email key, tag sets, trimmed strings, owner/company references', async () => {
    const [c, d] = [...h.ws.contacts.values()].slice(5, 7) as [SimContact, SimContact];
    const tags = h.ws.tags.slice(0, 2).map((t) => t.id);
    h.ws.updateRecord('contacts', c.id, {
      tag_ids: tags,
      owner_id: h.ws.owners[0]!.id,
      company_id: h.ws.companies[0]!.id,
    });
    const dEmail = d.email;
    const file = h.file(
      'normalised.csv',
      csv(
        ['email', 'name', 'tag_ids', 'owner_id', 'company_id'],
        [
          [
            `  ${c.email} `,
            ` ${c.name} `,
            `${tags[1]};${tags[0]};${tags[1]}`,
            h.ws.owners[0]!.id,
            h.ws.companies[0]!.id,
          ],
          // The key matches whatever the case, and the email compares as the CRM does: the same
          // address, unchanged (issue 46, item 5; `"compare": "exact"` writes the case: email-case.test.ts).
          [dEmail.toUpperCase(), d.name, '', '', ''],
        ],
      ),
    );
    h.ws.resetStats();
    const run = await reconcile(h, file, { op: 'contact.update' });
    expect(run.counts).toMatchObject({ skip: 2, update: 0 });
    await h.waitForRun(run.run.id);
    expect(writes(h)).toBe(0);
    expect(h.ws.contacts.get(d.id)!.email).toBe(dEmail);
  });

  it('reports unmatched and ambiguous keys without sending them', async () => {
    const leads = [...h.ws.leads.values()];
    const shared = leads[0]!;
    // A second lead on the same contact: its email (from the contact) now matches two leads.
    const twin = h.ws.createLead({ name: 'Twin lead', contact_id: shared.contact_id });
    const email = h.ws.leadJson(shared).email;
    const other = h.ws.leadJson(leads[1]!);
    const file = h.file(
      'leads.csv',
      csv(
        ['email', 'status'],
        [
          [email, 'archived'],
          ['nobody@nowhere.example', 'open'],
          [other.email, other.status === 'open' ? 'converted' : 'open'],
          ['', 'open'],
        ],
      ),
    );
    h.ws.resetStats();
    const res = await reconcile(h, file, { op: 'lead.update' });
    const run = await h.waitForRun(res.run.id);
    expect(res.counts).toMatchObject({ ambiguous: 1, 'not-found': 1, update: 1, invalid: 1 });
    expect(run.counts).toMatchObject({ total: 4, failed: 2, succeeded: 1, invalid: 1 });
    expect(h.ws.stats.writes.leadUpdate).toBe(1);
    const rows = await resultsByRow(h, res.run.id);
    expect(rows[0]).toMatchObject({ status: 'failed', code: 'RECONCILE_AMBIGUOUS' });
    expect(rows[0]!.message).toContain(shared.id);
    expect(rows[0]!.message).toContain(twin.id);
    expect(rows[1]).toMatchObject({
      status: 'failed',
      code: 'CRM_NOT_FOUND',
      message: 'no lead with email "nobody@nowhere.example"; not sent',
    });
    expect(rows[2]).toMatchObject({ status: 'succeeded', recordId: leads[1]!.id });
    expect(rows[3]).toMatchObject({ status: 'invalid' });
  });

  it('reports later rows for a CRM record an earlier row already matched as ambiguous, and sends only the first', async () => {
    const c = [...h.ws.contacts.values()][50]!;
    const file = h.file(
      'same-record.csv',
      csv(
        ['id', 'name', 'email', 'phone_number'],
        [
          ['', c.name, c.email, '+1 555-000-0001'],
          [c.id, `${c.name} II`, '', c.phone_number],
          ['', c.name, c.email.toUpperCase(), c.phone_number], // unchanged on its own, still a second row for the record
        ],
      ),
    );
    h.ws.resetStats();
    const res = await reconcile(h, file, { op: 'contact.update', matchKey: 'email' });
    const run = await h.waitForRun(res.run.id);
    expect(res.counts).toMatchObject({ update: 1, ambiguous: 2, skip: 0 });
    expect(run.counts).toMatchObject({ total: 3, succeeded: 1, failed: 2 });
    expect(h.ws.stats.writes.contactUpdate).toBe(1);
    expect(h.ws.contacts.get(c.id)).toMatchObject({ name: c.name, phone_number: '+1 555-000-0001' });
    const rows = await resultsByRow(h, res.run.id);
    expect(rows.map((r) => [r.status, r.code])).toEqual([
      ['succeeded', undefined],
      ['failed', 'RECONCILE_AMBIGUOUS'],
      ['failed', 'RECONCILE_AMBIGUOUS'],
    ]);
    expect(rows[1]!.message).toBe(`contact ${c.id} is also matched by row 1; not sent`);
  });

  it("upsert creates only the missing deals and takes an update's name from the CRM", async () => {
    const deals = [...h.ws.deals.values()].slice(0, 6);
    const before = h.ws.deals.size;
    const rows: Array<Array<string | number>> = deals.map((d, i) => [
      d.name,
      i < 2 ? d.value + 100 : d.value,
      d.status,
    ]);
    rows.push(
      ['Brand new deal A', 10, 'won'],
      ['Brand new deal B', 20, 'in_progress'],
      ['Brand new deal A', 30, 'won'],
    );
    const file = h.file('deals-upsert.csv', csv(['name', 'value', 'status'], rows));
    h.ws.resetStats();
    const res = await reconcile(h, file, { op: 'deal.upsert', matchKey: 'name' });
    const run = await h.waitForRun(res.run.id);
    expect(res.counts).toMatchObject({ create: 2, update: 2, skip: 4, ambiguous: 1 });
    expect(run.counts).toMatchObject({ total: 9, succeeded: 4, skipped: 4, failed: 1 });
    expect(h.ws.stats.writes).toMatchObject({ dealCreate: 2, dealUpdate: 2 });
    expect(h.ws.deals.size).toBe(before + 2);
    expect(run.operation).toBe('deal.upsert');

    // Rows keyed by unique_number with no name: the required name comes from the index.
    const d = deals[3]!;
    const byNumber = h.file(
      'deals-by-number.csv',
      csv(['unique_number', 'value'], [[d.unique_number.toLowerCase(), 4242]]),
    );
    h.ws.resetStats();
    const upd = await reconcile(h, byNumber, { op: 'deal.update' });
    const done = await h.waitForRun(upd.run.id);
    expect(done.counts.succeeded).toBe(1);
    expect(h.ws.deals.get(d.id)).toMatchObject({ name: d.name, value: 4242 });
  });

  it('plans without sending (counts and CSV), and dry runs record without sending', async () => {
    const { text } = contactsCsv(h, (i) => i < 7, '+1 777-555-');
    const file = h.file('plan.csv', `${text}"Ghost","ghost@nowhere.example",""\n`);
    const client = createCrmClient(h.config, 'acme', silentLogger);
    const out = new PassThrough();
    h.ws.resetStats();
    const plan = await planReconcile({ file, op: 'contact.update', workspace: 'acme', client, matchKey: 'email', out });
    client.close();
    const lines = (await collect(out)).trim().split('\n');
    expect(plan.counts).toMatchObject({ update: 7, skip: 113, 'not-found': 1 });
    expect(writes(h)).toBe(0);
    expect(lines[0]).toBe('row,line,action,record_id,key,changes,message,held_back');
    expect(lines).toHaveLength(122);
    expect(lines[1]).toMatch(/^1,2,update,con_\w+,[^,]+@[^,]+,phone_number: .* -> \+1 777-555-0000,,$/);
    expect(lines.at(-1)).toContain('not-found');

    const dry = await reconcile(h, file, { op: 'contact.update', dryRun: true });
    const run = await h.waitForRun(dry.run.id);
    expect(run.counts).toMatchObject({ skipped: 120, failed: 1 });
    expect(writes(h)).toBe(0);
  });

  it('verify reports create rows that more than one deal matches, and rows sharing one record id', async () => {
    const file = h.file(
      'verify-creates.csv',
      csv(
        ['name', 'value'],
        [
          ['Verify twin', 7],
          ['Verify single', 8],
        ],
      ),
    );
    const run = await h.waitForRun((await h.importFile(file, 'deal.create')).id);
    expect(run.counts.succeeded).toBe(2);
    const client = createCrmClient(h.config, 'acme', silentLogger);
    try {
      const clean = await verifyRun({ runId: run.id, store: h.runtime.store, client });
      expect(clean).toMatchObject({ checked: 2, matching: 2, sharedIds: 0, suspectedDuplicates: 0 });
      // A second deal just like row 1's (a duplicate create), and row 2 stored with row 1's id
      // (as an older version could record it): both must be reported.
      h.ws.createDeal({ name: 'verify  TWIN', value: 7 });
      const twinId = (await resultsByRow(h, run.id))[0]!.recordId!;
      const at = new Date().toISOString();
      await h.runtime.redis.hset(
        new RunKeys(h.env.CRM_SYNC_PREFIX!).resultBucket(run, 0),
        '2',
        `s${JSON.stringify({ l: 3, d: twinId, t: Date.parse(at) })}`,
      );
      const out = new PassThrough();
      const chunks: string[] = [];
      out.on('data', (c: Buffer) => chunks.push(c.toString()));
      const report = await verifyRun({ runId: run.id, store: h.runtime.store, client, out });
      expect(report).toMatchObject({ sharedIds: 2, suspectedDuplicates: 1 });
      expect(chunks.join('')).toContain('(duplicate)');
      expect(chunks.join('')).toContain('(shared id)');
    } finally {
      client.close();
    }
  });

  it('verify reports drift made directly in the CRM after a run', async () => {
    const contacts = [...h.ws.contacts.values()].slice(20, 30);
    const sentName = `${contacts[2]!.name} Jr.`;
    const file = h.file(
      'verify.csv',
      csv(
        ['id', 'name'],
        contacts.map((c) => [c.id, `${c.name} Jr.`]),
      ),
    );
    const run = await h.importFile(file, 'contact.update');
    const done = await h.waitForRun(run.id);
    expect(done.counts.succeeded).toBe(10);
    h.ws.updateRecord('contacts', contacts[2]!.id, { name: 'Someone Else' });
    h.ws.updateRecord('contacts', contacts[7]!.id, { phone_number: '+1 000-000-0000' }); // not sent: no drift
    const client = createCrmClient(h.config, 'acme', silentLogger);
    const out = new PassThrough();
    const report = await verifyRun({ runId: run.id, store: h.runtime.store, client, out });
    client.close();
    expect(report).toMatchObject({ checked: 10, matching: 9, drifted: 1, missing: 0, byField: { name: 1 } });
    const lines = (await collect(out)).trim().split('\n');
    expect(lines).toEqual([
      'row,line,record_id,field,sent,current',
      `3,4,${contacts[2]!.id},name,${sentName},Someone Else`,
    ]);
  });
});

describe("a CRM's record id that input rules would refuse (issue 43)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ records: 3, seed: 43 });
    await h.startWorkers();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a contact matched by email whose id holds a space and a slash is updated, not refused as an invalid row', async () => {
    // The spec allows any string id; the row has no id column, so no input rule is about it.
    const model = [...h.ws.contacts.values()][0]!;
    const id = 'con 43/a b';
    h.ws.contacts.set(id, { ...model, id, email: 'spaced.id@example.com', phone_number: '' });
    const file = h.file('spaced.csv', csv(['email', 'phone_number'], [['spaced.id@example.com', '+1 555 0143']]));
    const planned = await reconcile(h, file, { op: 'contact.update', matchKey: 'email' });
    expect(planned.counts).toMatchObject({ update: 1, invalid: 0 });
    const run = await h.waitForRun(planned.run.id);
    const [result] = await resultsByRow(h, run.id);
    expect(result).toMatchObject({ status: 'succeeded', recordId: id });
    // The PATCH reached that very record (its path segment escaped).
    expect(h.ws.contacts.get(id)?.phone_number).toBe('+1 555 0143');
  });
});
