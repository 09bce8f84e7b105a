import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator, type SimWorkspace } from '../../src/sim/index.js';

let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({
    workspaces: [
      { name: 'a', apiKeys: ['a'], records: 300, seed: 7 },
      { name: 'b', apiKeys: ['b'], records: 300, seed: 7 },
      { name: 'c', apiKeys: ['c'], records: 300, seed: 8 },
      { name: 'd', apiKeys: ['d'], records: 50, seed: 7 },
    ],
  });
});
afterAll(() => sim.close());

function snapshot(ws: SimWorkspace) {
  return {
    deals: [...ws.deals.values()].map((d) => ws.dealJson(d)),
    leads: [...ws.leads.values()].map((l) => ws.leadJson(l)),
    contacts: [...ws.contacts.values()].map((c) => ws.contactJson(c)),
    ref: { owners: ws.owners, pipelines: ws.pipelines, stages: ws.stages, tags: ws.tags, companies: ws.companies },
  };
}

describe('seed data', () => {
  it('is identical for the same seed and differs for another seed', () => {
    const a = snapshot(sim.workspace('a'));
    expect(snapshot(sim.workspace('b'))).toEqual(a);
    const c = snapshot(sim.workspace('c'));
    expect(c.contacts.map((x) => x.email)).not.toEqual(a.contacts.map((x) => x.email));
    expect(c.deals.map((x) => x.id)).not.toEqual(a.deals.map((x) => x.id));
  });

  it('fewer records with the same seed are a prefix of more records', () => {
    const big = snapshot(sim.workspace('a'));
    const small = snapshot(sim.workspace('d'));
    expect(small.contacts).toEqual(big.contacts.slice(0, 50));
    expect(small.ref).toEqual(big.ref);
  });

  it('has N deals, leads and contacts and the promised reference data', () => {
    const ws = sim.workspace('a');
    expect([ws.deals.size, ws.leads.size, ws.contacts.size]).toEqual([300, 300, 300]);
    expect(ws.owners).toHaveLength(8);
    expect(ws.pipelines).toHaveLength(2);
    expect(ws.stages).toHaveLength(10);
    expect(ws.tags).toHaveLength(12);
    expect(ws.companies).toHaveLength(50);
    for (const s of ws.stages) expect(ws.pipelines.map((p) => p.id)).toContain(s.pipelineId);
  });

  it('contacts have unique, valid emails; leads get their contact email; ids and unique numbers are unique', () => {
    const ws = sim.workspace('a');
    const emails = [...ws.contacts.values()].map((c) => c.email.toLowerCase());
    expect(new Set(emails).size).toBe(emails.length);
    for (const e of emails) expect(e).toMatch(/^[a-z0-9.]+@[a-z0-9.-]+\.[a-z]+$/);
    const leadEmails = [...ws.leads.values()].map((l) => ws.leadJson(l).email.toLowerCase());
    expect(new Set(leadEmails).size).toBe(leadEmails.length);
    const ids = [...ws.deals.keys(), ...ws.leads.keys(), ...ws.contacts.keys()];
    expect(new Set(ids).size).toBe(900);
    const numbers = [...ws.deals.values()].map((d) => d.unique_number);
    expect(new Set(numbers).size).toBe(300);
    expect(numbers[0]).toBe('D-000001');
  });

  it('looks realistic: names are two words, deals use reference ids, statuses vary', () => {
    const ws = sim.workspace('a');
    for (const c of ws.contacts.values()) expect(c.name).toMatch(/^\S+ \S+$/);
    const statuses = new Set([...ws.deals.values()].map((d) => d.status));
    expect(statuses).toEqual(new Set(['in_progress', 'won', 'lost']));
    for (const d of ws.deals.values()) {
      const json = ws.dealJson(d);
      expect(json.stage).not.toBeNull();
      expect(json.price).toMatch(/^[$€£][\d,]+\.\d\d$/);
    }
    const names = [...ws.deals.values()].map((d) => d.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it('seeded timestamps are fixed ISO strings; updated_at is never before created_at', () => {
    const ws = sim.workspace('a');
    for (const c of ws.contacts.values()) {
      expect(new Date(c.created_at).toISOString()).toBe(c.created_at);
      expect(c.updated_at >= c.created_at).toBe(true);
    }
  });
});
