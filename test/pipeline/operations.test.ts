import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ records: 60 });
  await h.startWorkers();
});
afterAll(async () => h?.close());

describe('import pipeline, every operation end to end (real Redis, simulator over HTTP)', () => {
  it('deal.update: updates the CRM, fails 404/422 rows with the service message, never sends invalid rows', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 20);
    const stage = h.ws.stages[1]!;
    const tags = h.ws.tags.slice(0, 2).map((t) => t.id);
    const rows: Array<Array<string | number>> = deals.map((d, i) => [
      d.id,
      `Renamed ${i}`,
      1000 + i,
      stage.id,
      tags.join(';'),
    ]);
    rows.splice(5, 0, [deals[0]!.id, 'Bad value', 'twelve', stage.id, '']); // row 6: invalid
    rows.push(['deal_does_not_exist', 'Ghost', 5, stage.id, '']); // row 22: 404
    rows.push([deals[1]!.id, 'Bad stage', 5, 'stg_nope', '']); // row 23: 422
    const file = h.file('deals.csv', csv(['id', 'name', 'value', 'stage_id', 'tag_ids'], rows));
    const before = h.ws.stats.writes.dealUpdate;
    const answered = { ...h.ws.stats.byStatus };
    const run = await h.waitForRun((await h.importFile(file, 'deal.update')).id);

    expect(run.status).toBe('completed');
    expect(run.counts).toMatchObject({ total: 23, succeeded: 20, failed: 2, invalid: 1, queued: 0, skipped: 0 });
    const results = await resultsByRow(h, run.id);
    expect(results.map((r) => r.row)).toEqual(Array.from({ length: 23 }, (_, i) => i + 1));
    const invalid = results.find((r) => r.row === 6)!;
    expect(invalid).toMatchObject({ status: 'invalid', line: 7 });
    expect(invalid.errors?.[0]?.field).toContain('value');
    expect(results.find((r) => r.row === 22)).toMatchObject({
      status: 'failed',
      httpStatus: 404,
      code: 'CRM_NOT_FOUND',
    });
    const rejected = results.find((r) => r.row === 23)!;
    expect(rejected).toMatchObject({ status: 'failed', httpStatus: 422, code: 'CRM_REJECTED' });
    expect(rejected.message).toMatch(/stage/i);
    expect(rejected.original).toMatchObject({ id: deals[1]!.id, stage_id: 'stg_nope' });
    // 20 good rows applied, the invalid row never sent; failed rows did not change anything.
    expect(h.ws.stats.writes.dealUpdate - before).toBe(20);
    // Permanent answers are final: each failed row was sent exactly once.
    expect((h.ws.stats.byStatus[404] ?? 0) - (answered[404] ?? 0)).toBe(1);
    expect((h.ws.stats.byStatus[422] ?? 0) - (answered[422] ?? 0)).toBe(1);
    for (const [i, d] of deals.entries()) {
      const now = h.ws.deals.get(d.id)!;
      expect(now).toMatchObject({ name: `Renamed ${i}`, value: 1000 + i, stage_id: stage.id, tag_ids: tags });
      expect(results.find((r) => r.recordId === d.id && r.status === 'succeeded')).toBeDefined();
    }
  });

  it('deal.create: creates one deal per valid row', async () => {
    const before = h.ws.deals.size;
    const file = h.file(
      'new-deals.csv',
      csv(
        ['name', 'value', 'status'],
        [
          ['Alpha', 10, 'won'],
          ['Beta', 20, 'in_progress'],
          ['', 5, 'won'],
          ['Gamma', 30, 'maybe'],
        ],
      ),
    );
    const run = await h.waitForRun((await h.importFile(file, 'deal.create')).id);
    expect(run.counts).toMatchObject({ total: 4, succeeded: 2, invalid: 2 });
    expect(h.ws.deals.size - before).toBe(2);
    const results = await resultsByRow(h, run.id);
    expect(h.ws.deals.get(results[0]!.recordId!)).toMatchObject({ name: 'Alpha', value: 10, status: 'won' });
    expect(h.ws.deals.get(results[1]!.recordId!)).toMatchObject({ name: 'Beta', value: 20, status: 'in_progress' });
    expect(results.find((r) => r.row === 4)?.message).toMatch(/status/);
  });

  it('lead.update and contact.update from NDJSON and JSON arrays', async () => {
    const leads = [...h.ws.leads.values()].slice(0, 5);
    const ndjson = leads.map((l) => JSON.stringify({ id: l.id, status: 'converted' })).join('\n') + '\n';
    const leadRun = await h.waitForRun((await h.importFile(h.file('leads.ndjson', ndjson), 'lead.update')).id);
    expect(leadRun.counts).toMatchObject({ total: 5, succeeded: 5 });
    for (const l of leads) expect(h.ws.leads.get(l.id)?.status).toBe('converted');

    const contacts = [...h.ws.contacts.values()].slice(0, 4);
    const json = JSON.stringify(
      contacts.map((c, i) => ({ id: c.id, phone_number: `+1 555 010${i}`, company_id: h.ws.companies[0]!.id })),
      null,
      2,
    );
    const contactRun = await h.waitForRun((await h.importFile(h.file('contacts.json', json), 'contact.update')).id);
    expect(contactRun.counts).toMatchObject({ total: 4, succeeded: 4 });
    contacts.forEach((c, i) =>
      expect(h.ws.contacts.get(c.id)).toMatchObject({
        phone_number: `+1 555 010${i}`,
        company_id: h.ws.companies[0]!.id,
      }),
    );
  });

  it('team.invite: batches emails, one result per row', async () => {
    const emails = Array.from({ length: 23 }, (_, i) => [`new.member${i}@invites.example`, 'Standard', 'false']);
    emails.push(['not-an-email', 'Standard', 'false']);
    const file = h.file('invites.csv', csv(['email', 'organization_role', 'send_invitation_email'], emails));
    const requestsBefore = h.ws.stats.writes.teamMembers;
    const run = await h.waitForRun((await h.importFile(file, 'team.invite', { inviteBatchSize: 10 })).id);
    expect(run.counts).toMatchObject({ total: 24, succeeded: 23, invalid: 1 });
    expect(h.ws.stats.writes.teamMembers - requestsBefore).toBe(3); // 10 + 10 + 3
    for (let i = 0; i < 23; i++)
      expect(h.ws.teamMembers.get(`new.member${i}@invites.example`)?.invitationEmailSent).toBe(false);
  });

  it('dry run validates and records every row, sends nothing', async () => {
    const writes = { ...h.ws.stats.writes };
    const requests = h.ws.stats.requests;
    const d = [...h.ws.deals.values()][30]!;
    const file = h.file(
      'dry.csv',
      csv(
        ['id', 'name'],
        [
          [d.id, 'Dry'],
          ['', 'No id'],
        ],
      ),
    );
    const run = await h.waitForRun((await h.importFile(file, 'deal.update', { dryRun: true })).id);
    expect(run.counts).toMatchObject({ total: 2, skipped: 1, invalid: 1 });
    expect(h.ws.stats.writes).toEqual(writes);
    expect(h.ws.stats.requests).toBe(requests); // not even a rejected request
    expect(h.ws.deals.get(d.id)?.name).not.toBe('Dry');
  });
});
