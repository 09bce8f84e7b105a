import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator, type SimWorkspace } from '../../src/sim/index.js';
import { httpRequest } from '../helpers/http.js';
import { client, errorOf, SpecContact, SpecDeal, SpecLead } from './sim-fixture.js';

let sim: Simulator;
let ws: SimWorkspace;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sim = await startSimulator({ workspaces: [{ name: 'acme', apiKeys: ['k'], records: 20, seed: 3 }] });
  ws = sim.workspace('acme');
  api = client(sim, 'acme', 'k');
});
afterAll(() => sim.close());

const firstId = (map: Map<string, unknown>): string => {
  const id = map.keys().next().value;
  if (id === undefined) throw new Error('empty map');
  return id;
};

describe('record shapes (spec §2)', () => {
  it('every seeded record renders with every spec field and the right types', () => {
    for (const d of ws.deals.values()) SpecDeal.parse(ws.dealJson(d));
    for (const l of ws.leads.values()) SpecLead.parse(ws.leadJson(l));
    for (const c of ws.contacts.values()) SpecContact.parse(ws.contactJson(c));
  });

  it('a lead carries the email and phone of its contact', () => {
    for (const l of ws.leads.values()) {
      const json = ws.leadJson(l);
      const contact = ws.contacts.get(json.contact.id ?? '');
      expect(contact).toBeDefined();
      expect(json.email).toBe(contact?.email);
      expect(json.phone_number).toBe(contact?.phone_number);
    }
  });

  it('deal price is formatted from value and currency; owner is the owner id', () => {
    const d = ws.createDeal({ name: 'Priced', value: 1250, currency: 'USD', owner_id: ws.owners[0]?.id ?? '' });
    const json = ws.dealJson(d);
    expect(json.price).toBe('$1,250.00');
    expect(json.owner).toBe(ws.owners[0]?.id);
    expect(ws.dealJson(ws.createDeal({ name: 'Euro', value: 99.5, currency: 'EUR' })).price).toBe('€99.50');
  });
});

describe('ids of created records', () => {
  it('are never the ones another simulator with the same seed gave out (a CRM never issues an id twice)', async () => {
    const again = await startSimulator({ workspaces: [{ name: 'acme', apiKeys: ['k'], records: 20, seed: 3 }] });
    try {
      const twin = again.workspace('acme');
      // The seed data is the same…
      expect([...ws.deals.keys()].slice(0, twin.deals.size)).toEqual([...twin.deals.keys()]);
      // …but what each creates next is not.
      const mine = Array.from({ length: 5 }, (_, i) => ws.createDeal({ name: `Mine ${i}` }).id);
      const theirs = Array.from({ length: 5 }, (_, i) => twin.createDeal({ name: `Theirs ${i}` }).id);
      expect(mine.filter((id) => theirs.includes(id))).toEqual([]);
    } finally {
      await again.close();
    }
  });
});

describe('POST v2/deals', () => {
  it('creates a deal: 201 {deal} with a new unique_number and nulls for what was not given', async () => {
    const before = ws.deals.size;
    const res = await api.post('v2/deals', { deal: { name: 'New deal', value: 10 } });
    expect(res.status).toBe(201);
    const deal = SpecDeal.parse((res.json as { deal: unknown }).deal);
    expect(deal).toMatchObject({
      name: 'New deal',
      value: 10,
      status: 'in_progress',
      owner: null,
      pipeline: null,
      stage: null,
      tags: [],
    });
    expect(ws.deals.size).toBe(before + 1);
    expect(ws.deals.get(deal.id)?.name).toBe('New deal');
    const numbers = [...ws.deals.values()].map((d) => d.unique_number);
    expect(new Set(numbers).size).toBe(numbers.length);
  });

  it('accepts every documented field and resolves refs to {id,name}', async () => {
    const stage = ws.stages[3];
    const tag = ws.tags[0];
    const owner = ws.owners[1];
    if (!stage || !tag || !owner) throw new Error('reference data missing');
    const res = await api.post('v2/deals', {
      deal: {
        name: 'Full',
        value: 5,
        status: 'won',
        owner_id: owner.id,
        stage_id: stage.id,
        pipeline_id: stage.pipelineId,
        position: 2,
        tag_ids: [tag.id],
      },
    });
    expect(res.status).toBe(201);
    const deal = SpecDeal.parse((res.json as { deal: unknown }).deal);
    expect(deal.stage).toEqual({ id: stage.id, name: stage.name });
    expect(deal.pipeline?.id).toBe(stage.pipelineId);
    expect(deal.tags).toEqual([{ id: tag.id, name: tag.name, style: tag.style }]);
    expect(deal.owner).toBe(owner.id);
  });

  it.each([
    ['no wrapper', { name: 'x' }, /deal/],
    ['no name', { deal: { value: 1 } }, /name.*required/],
    ['unknown field', { deal: { name: 'x', colour: 'red' } }, /unknown field.*colour/],
    ['value as string', { deal: { name: 'x', value: '12' } }, /deal\.value/],
    ['bad status', { deal: { name: 'x', status: 'open' } }, /deal\.status/],
    ['fractional position', { deal: { name: 'x', position: 1.5 } }, /deal\.position/],
    ['unknown owner', { deal: { name: 'x', owner_id: 'usr_nope' } }, /owner_id/],
    ['unknown stage', { deal: { name: 'x', stage_id: 'stg_nope' } }, /stage_id/],
    ['unknown pipeline', { deal: { name: 'x', pipeline_id: 'pip_nope' } }, /pipeline_id/],
    ['unknown tag', { deal: { name: 'x', tag_ids: ['tag_nope'] } }, /tag_ids.*tag_nope/],
    ['blank name', { deal: { name: '  ' } }, /deal\.name/],
    ['array body', [], /JSON object/],
  ])('422 {error} for %s, nothing created', async (_case, body, message) => {
    const before = ws.deals.size;
    const res = await api.post('v2/deals', body);
    expect(res.status).toBe(422);
    expect(errorOf(res)).toMatch(message);
    expect(ws.deals.size).toBe(before);
  });

  it('400 {error} for a body that is not JSON, or empty', async () => {
    const bad = await httpRequest({
      port: sim.port,
      method: 'POST',
      path: '/api/external/v2/deals',
      host: `acme.localhost:${sim.port}`,
      headers: { 'x-api-key': 'k', 'content-type': 'application/json' },
      rawBody: '{"deal":',
    });
    expect(bad.status).toBe(400);
    expect(errorOf(bad)).toBeTruthy();
    const empty = await api.call('POST', 'v2/deals', undefined, { 'content-type': 'application/json' });
    expect(empty.status).toBe(400);
    expect(errorOf(empty)).toBeTruthy();
  });
});

describe('PATCH v2/deals/{id}', () => {
  it('updates and answers 200 {deal}; updated_at moves forward', async () => {
    const id = firstId(ws.deals);
    const before = ws.dealJson(ws.deals.get(id) ?? (undefined as never));
    const res = await api.patch(`v2/deals/${id}`, { deal: { name: 'Renamed', value: 42 } });
    expect(res.status).toBe(200);
    const deal = SpecDeal.parse((res.json as { deal: unknown }).deal);
    expect(deal).toMatchObject({ id, name: 'Renamed', value: 42, created_at: before.created_at });
    expect(Date.parse(deal.updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
    const again = SpecDeal.parse(
      ((await api.patch(`v2/deals/${id}`, { deal: { name: 'Renamed' } })).json as { deal: unknown }).deal,
    );
    expect(Date.parse(again.updated_at)).toBeGreaterThan(Date.parse(deal.updated_at));
  });

  it('422 when name is missing, and nothing changes', async () => {
    const id = firstId(ws.deals);
    const stamp = ws.deals.get(id)?.updated_at;
    const res = await api.patch(`v2/deals/${id}`, { deal: { value: 1 } });
    expect(res.status).toBe(422);
    expect(errorOf(res)).toMatch(/name is required|name.*required/);
    expect(ws.deals.get(id)?.updated_at).toBe(stamp);
  });

  it('a stage moves the deal to its pipeline; a stage of another pipeline is refused', async () => {
    const id = firstId(ws.deals);
    const [p1, p2] = ws.pipelines;
    const s2 = ws.stages.find((s) => s.pipelineId === p2?.id);
    const res = await api.patch(`v2/deals/${id}`, { deal: { name: 'Moved', stage_id: s2?.id } });
    expect((res.json as { deal: { pipeline: { id: string } } }).deal.pipeline.id).toBe(p2?.id);
    const bad = await api.patch(`v2/deals/${id}`, { deal: { name: 'Moved', stage_id: s2?.id, pipeline_id: p1?.id } });
    expect(bad.status).toBe(422);
    expect(errorOf(bad)).toMatch(/stage_id/);
  });

  it('404 {error} for an unknown id', async () => {
    const res = await api.patch('v2/deals/del_missing', { deal: { name: 'x' } });
    expect(res.status).toBe(404);
    expect(errorOf(res)).toMatch(/not found/i);
  });
});

describe('PATCH v2/leads/{id}', () => {
  it('updates name, status, owner and tags: 200 {lead}', async () => {
    const id = firstId(ws.leads);
    const tags = ws.tags.slice(0, 2).map((t) => t.id);
    const res = await api.patch(`v2/leads/${id}`, {
      lead: { name: 'Lead X', status: 'archived', owner_id: ws.owners[2]?.id, tag_ids: tags },
    });
    expect(res.status).toBe(200);
    const lead = SpecLead.parse((res.json as { lead: unknown }).lead);
    expect(lead).toMatchObject({ id, name: 'Lead X', status: 'archived', owner: ws.owners[2]?.id });
    expect(lead.tags.map((t) => t.id)).toEqual(tags);
    expect(ws.stats.writes.leadUpdate).toBeGreaterThan(0);
  });

  it.each([
    ['no wrapper', { name: 'x' }, /lead/],
    ['deal fields', { lead: { value: 1 } }, /unknown field.*value/],
    ['bad status', { lead: { status: 'won' } }, /lead\.status/],
    ['unknown owner', { lead: { owner_id: 'usr_x' } }, /owner_id/],
    ['tag ids not an array', { lead: { tag_ids: 'tag' } }, /lead\.tag_ids/],
    ['empty update', { lead: {} }, /at least one/],
  ])('422 for %s', async (_case, body, message) => {
    const res = await api.patch(`v2/leads/${firstId(ws.leads)}`, body);
    expect(res.status).toBe(422);
    expect(errorOf(res)).toMatch(message);
  });

  it('404 for an unknown id', async () => {
    expect((await api.patch('v2/leads/nope', { lead: { name: 'x' } })).status).toBe(404);
  });
});

describe('PATCH v2/contacts/{id}', () => {
  it('updates every documented field: 200 {contact}; leads then show the new email', async () => {
    const id = firstId(ws.contacts);
    const company = ws.companies[7];
    const res = await api.patch(`v2/contacts/${id}`, {
      contact: {
        name: 'C X',
        email: 'cx@new.example',
        phone_number: '',
        company_id: company?.id,
        owner_id: ws.owners[0]?.id,
        tag_ids: [],
      },
    });
    expect(res.status).toBe(200);
    const contact = SpecContact.parse((res.json as { contact: unknown }).contact);
    expect(contact).toMatchObject({
      id,
      name: 'C X',
      email: 'cx@new.example',
      phone_number: '',
      company: { id: company?.id, name: company?.name },
      tags: [],
    });
    const lead = [...ws.leads.values()].find((l) => l.contact_id === id);
    if (lead) expect(ws.leadJson(lead).email).toBe('cx@new.example');
  });

  it.each([
    ['bad email', { contact: { email: 'nope' } }, /contact\.email/],
    ['unknown company', { contact: { company_id: 'cmp_x' } }, /company_id/],
    ['number phone', { contact: { phone_number: 5 } }, /phone_number/],
    ['unknown field', { contact: { title: 'CEO' } }, /unknown field.*title/],
  ])('422 for %s', async (_case, body, message) => {
    const res = await api.patch(`v2/contacts/${firstId(ws.contacts)}`, body);
    expect(res.status).toBe(422);
    expect(errorOf(res)).toMatch(message);
  });

  it("422 for another contact's email (emails stay unique)", async () => {
    const [a, b] = [...ws.contacts.values()];
    const res = await api.patch(`v2/contacts/${a?.id}`, { contact: { email: b?.email.toUpperCase() } });
    expect(res.status).toBe(422);
    expect(errorOf(res)).toMatch(/already used/);
  });

  it('404 for an unknown id', async () => {
    expect((await api.patch('v2/contacts/nope', { contact: { name: 'x' } })).status).toBe(404);
  });
});

describe('direct edits for tests', () => {
  it('updateRecord changes a record and bumps updated_at; the API then shows it', async () => {
    const id = firstId(ws.contacts);
    const before = ws.contacts.get(id)?.updated_at ?? '';
    ws.updateRecord('contacts', id, { phone_number: '+1 000' });
    expect(ws.contacts.get(id)?.phone_number).toBe('+1 000');
    expect(Date.parse(ws.contacts.get(id)?.updated_at ?? '')).toBeGreaterThan(Date.parse(before));
    const page = (await api.get('v2/contacts?page_size=1')).json as { contacts: Array<{ phone_number: string }> };
    expect(page.contacts[0]?.phone_number).toBe('+1 000');
  });

  it('direct edits are validated and unknown ids throw', () => {
    expect(() => ws.updateRecord('deals', 'nope', { name: 'x' })).toThrow(/no deals record/);
    expect(() => ws.updateRecord('deals', firstId(ws.deals), { value: 'x' })).toThrow(/invalid direct edit/);
    expect(() => ws.createContact({ name: 'Dup', email: [...ws.contacts.values()][1]?.email ?? '' })).toThrow(
      /already used/,
    );
    const lead = ws.createLead({ name: 'Solo' });
    expect(ws.leadJson(lead)).toMatchObject({
      email: '',
      contact: { id: null, name: 'Solo' },
      company: { id: null, name: null },
    });
  });
});
