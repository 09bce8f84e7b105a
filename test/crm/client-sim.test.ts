import { inspect } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import {
  AuthError,
  CrmClient,
  NotFoundError,
  RateLimitedError,
  RejectedError,
  TransientError,
  type CrmClientOptions,
  type ListPage,
} from '../../src/crm/index.js';
import { startSimulator } from '../../src/sim/index.js';

/** The client against the real simulator over HTTP: the two meet only on the wire. */

type Sim = Awaited<ReturnType<typeof startSimulator>>;

const KEY = 'k1-acme-7c0ffee';
let sim: Sim;
const clients: CrmClient[] = [];

beforeAll(async () => {
  sim = await startSimulator({
    port: 0,
    workspaces: [
      { name: 'acme', apiKeys: [KEY], records: 1000, seed: 7, rateLimit: null },
      { name: 'globex', apiKeys: ['k-globex'], records: 5, seed: 8, rateLimit: null },
      { name: 'slow', apiKeys: ['k-slow'], records: 40, seed: 9, rateLimit: null },
    ],
  });
});

afterAll(async () => {
  for (const c of clients) c.close();
  await sim?.close();
});

beforeEach(() => {
  for (const name of ['acme', 'globex', 'slow']) {
    sim.workspace(name).setFaults(null);
    sim.workspace(name).setRateLimit(null);
  }
});

function client(workspace = 'acme', key = KEY, extra: Partial<CrmClientOptions> = {}): CrmClient {
  const c = new CrmClient({ workspace, baseUrl: sim.baseUrl(workspace), apiKey: new Secret(key), ...extra });
  clients.push(c);
  return c;
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e,
  );
}

function expectNoKey(value: unknown, key = KEY): void {
  expect(inspect(value, { depth: 20, showHidden: true })).not.toContain(key);
  expect(JSON.stringify(value) ?? '').not.toContain(key);
  if (value instanceof Error) expect(value.stack ?? '').not.toContain(key);
}

const first = <T>(m: Map<string, T>): [string, T] => {
  const e = m.entries().next();
  if (e.done) throw new Error('empty map');
  return e.value;
};

describe('writes against the simulator', () => {
  it('createDeal creates a deal the simulator holds', async () => {
    const ws = sim.workspace('acme');
    const before = ws.deals.size;
    const owner = ws.owners[0]!;
    const stage = ws.stages[0]!;
    const deal = await client().createDeal({
      name: 'Imported deal',
      value: 1234.5,
      status: 'won',
      owner_id: owner.id,
      pipeline_id: stage.pipelineId,
      stage_id: stage.id,
      tag_ids: [ws.tags[0]!.id],
    });
    expect(deal.name).toBe('Imported deal');
    expect(ws.deals.size).toBe(before + 1);
    expect(ws.deals.get(deal.id)?.value).toBe(1234.5);
    expect(deal.stage?.id).toBe(stage.id);
    expect(deal.tags.map((t) => t.id)).toEqual([ws.tags[0]!.id]);
  });

  it('updateDeal, updateLead and updateContact change the records', async () => {
    const ws = sim.workspace('acme');
    const c = client();
    const [dealId] = first(ws.deals);
    const deal = await c.updateDeal(dealId, { name: 'Renamed deal', value: 99 });
    expect(deal.name).toBe('Renamed deal');
    expect(ws.deals.get(dealId)?.name).toBe('Renamed deal');
    expect(ws.deals.get(dealId)?.value).toBe(99);

    const [leadId] = first(ws.leads);
    const lead = await c.updateLead(leadId, { status: 'archived', name: 'Renamed lead' });
    expect(lead.status).toBe('archived');
    expect(ws.leads.get(leadId)?.status).toBe('archived');

    const [contactId] = first(ws.contacts);
    const contact = await c.updateContact(contactId, { phone_number: '+1 555 0100' });
    expect(contact.phone_number).toBe('+1 555 0100');
    expect(ws.contacts.get(contactId)?.phone_number).toBe('+1 555 0100');
  });

  it('addTeamMembers adds the members', async () => {
    const ws = sim.workspace('acme');
    const res = await client().addTeamMembers({
      emails: ['new.person@example.com'],
      organization_role: 'Admin',
      send_invitation_email: 'false',
    });
    expect(res.message.length).toBeGreaterThan(0);
    expect(ws.teamMembers.get('new.person@example.com')?.role).toBe('Admin');
  });
});

describe('send delays', () => {
  it('each answered request reports how long it took to reach the wire, until the watch is stopped', async () => {
    const c = client();
    const seen: number[] = [];
    const stop = c.watchSendDelays((ms) => seen.push(ms));
    const [deal] = [...sim.workspace('acme').deals.keys()];
    await c.updateDeal(deal!, { name: 'Watched' });
    await c.updateDeal(deal!, { name: 'Watched again' });
    expect(seen).toHaveLength(2);
    for (const ms of seen) expect(ms).toBeGreaterThanOrEqual(0);
    stop();
    await c.updateDeal(deal!, { name: 'Not watched' });
    expect(seen).toHaveLength(2);
  });

  it('onWire is told once when a request has left, at a time between the call and its return; never for one that did not start', async () => {
    const c = client();
    const [deal] = [...sim.workspace('acme').deals.keys()];
    const wired: number[] = [];
    const called = performance.timeOrigin + performance.now();
    await c.updateDeal(deal!, { name: 'On the wire' }, { onWire: (at) => wired.push(at) });
    expect(wired).toHaveLength(1);
    expect(wired[0]).toBeGreaterThanOrEqual(called);
    expect(wired[0]).toBeLessThanOrEqual(performance.timeOrigin + performance.now());
    // Aborted before it starts: no request, no call.
    const abort = new AbortController();
    abort.abort(new Error('stop'));
    const none: number[] = [];
    await failure(c.updateDeal(deal!, { name: 'Never sent' }, { signal: abort.signal, onWire: (at) => none.push(at) }));
    expect(none).toEqual([]);
  });
});

describe('error classes against the simulator', () => {
  it('401 for a wrong, revoked or foreign key → AuthError with the service message, no key anywhere', async () => {
    const ws = sim.workspace('acme');
    ws.addApiKey('k-temp-revoked');
    ws.revokeApiKey('k-temp-revoked');
    const [dealId] = first(ws.deals);
    for (const key of ['wrong-key-123', 'k-temp-revoked', 'k-globex']) {
      const c = client('acme', key);
      const err = await failure(c.updateDeal(dealId, { name: 'x' }));
      expect(err).toBeInstanceOf(AuthError);
      expect((err as AuthError).status).toBe(401);
      expect((err as AuthError).serviceMessage).toBe('Could not authenticate, invalid API Key');
      expect((err as AuthError).workspace).toBe('acme');
      expectNoKey(err, key);
      expectNoKey(c, key);
    }
  });

  it('404 → NotFoundError', async () => {
    const err = await failure(client().updateDeal('no-such-deal', { name: 'x' }));
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).path).toBe('/api/external/v2/deals/no-such-deal');
  });

  it("422 → RejectedError with the service's message", async () => {
    const bad = await failure(client().addTeamMembers({ emails: ['ok@example.com'], organization_role: 'Emperor' }));
    expect(bad).toBeInstanceOf(RejectedError);
    expect((bad as RejectedError).status).toBe(422);
    expect((bad as RejectedError).serviceMessage).toContain('organization_role');
    expect((bad as RejectedError).message).toContain('organization_role');
    const badEmail = await failure(client().addTeamMembers({ emails: ['ok@example.com', 'not-an-email'] }));
    expect(badEmail).toBeInstanceOf(RejectedError);
    expect((badEmail as RejectedError).serviceMessage).toContain('not-an-email');
    const [dealId] = first(sim.workspace('acme').deals);
    // Bypasses the typed body on purpose: the API itself must reject a deal update without name.
    const noName = await failure(client().updateDeal(dealId, { value: 5 } as unknown as { name: string }));
    expect(noName).toBeInstanceOf(RejectedError);
    expect((noName as RejectedError).serviceMessage).toMatch(/name/i);
  });

  it('429 → RateLimitedError with retryAfterMs', async () => {
    const ws = sim.workspace('globex');
    ws.setRateLimit({ max: 1, windowMs: 60_000 });
    const c = client('globex', 'k-globex');
    await c.listPage('deals', { pageNumber: 1, pageSize: 5 });
    const err = await failure(c.listPage('deals', { pageNumber: 1, pageSize: 5 }));
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAfterMs).toBeGreaterThan(0);
  });

  it('5xx and reset → TransientError, nothing applied', async () => {
    const ws = sim.workspace('globex');
    const c = client('globex', 'k-globex');
    const [dealId, before] = first(ws.deals);
    const nameBefore = before.name;
    ws.setFaults({ errorRate: 1 });
    const e5 = await failure(c.updateDeal(dealId, { name: 'should not apply' }));
    expect(e5).toBeInstanceOf(TransientError);
    expect((e5 as TransientError).status).toBeGreaterThanOrEqual(500);
    ws.setFaults({ resetRate: 1 });
    const reset = await failure(c.updateDeal(dealId, { name: 'should not apply' }));
    expect(reset).toBeInstanceOf(TransientError);
    expect((reset as TransientError).status).toBeUndefined();
    expect(ws.deals.get(dealId)?.name).toBe(nameBefore);
  });

  it('commit-then-drop on create → TransientError with maybeCommitted, and the deal exists', async () => {
    const ws = sim.workspace('globex');
    const before = ws.deals.size;
    ws.setFaults({ commitThenDropRate: 1 });
    const err = await failure(client('globex', 'k-globex').createDeal({ name: 'Dropped answer' }));
    expect(err).toBeInstanceOf(TransientError);
    expect((err as TransientError).maybeCommitted).toBe(true);
    expect(ws.deals.size).toBe(before + 1);
  });
});

describe('pager against the simulator', () => {
  it.each([7, 100])('pages 1,000 deals with page size %i, each record exactly once', async (pageSize) => {
    const ws = sim.workspace('acme');
    const c = client();
    const ids: string[] = [];
    let pages = 0;
    for await (const page of c.pages('deals', { pageSize })) {
      pages++;
      expect(page.pagination.page_size).toBe(pageSize);
      for (const r of page.records) ids.push(r.id);
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids)).toEqual(new Set(ws.deals.keys()));
    expect(pages).toBe(Math.ceil(ws.deals.size / pageSize));
  });

  it('pages contacts over v1 too', async () => {
    let n = 0;
    for await (const r of client('acme', KEY, { listVersion: 'v1' }).records('contacts', { pageSize: 100 })) {
      expect(r.email).toContain('@');
      n++;
    }
    expect(n).toBe(sim.workspace('acme').contacts.size);
  });

  it('records created while paging are yielded once, with nothing lost or repeated', async () => {
    const ws = sim.workspace('slow');
    const original = new Set(ws.leads.keys());
    const created: string[] = [];
    const ids: string[] = [];
    const onPage = (page: ListPage<unknown>) => {
      if (created.length < 6 && page.records.length > 0)
        created.push(ws.createLead({ name: `During paging ${created.length}` }).id);
    };
    for await (const r of client('slow', 'k-slow').records('leads', { pageSize: 7, onPage })) ids.push(r.id);
    expect(created.length).toBeGreaterThan(0);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of original) expect(ids).toContain(id);
    for (const id of created) expect(ids).toContain(id);
  });

  it('retries a page through 429s', async () => {
    const ws = sim.workspace('slow');
    ws.resetStats();
    ws.setRateLimit({ max: 2, windowMs: 500 });
    const ids: string[] = [];
    for await (const r of client('slow', 'k-slow').records('contacts', { pageSize: 10 })) ids.push(r.id);
    expect(ws.stats.rateLimited).toBeGreaterThan(0);
    expect(new Set(ids)).toEqual(new Set(ws.contacts.keys()));
    expect(ids.length).toBe(ws.contacts.size);
  });

  it('retries a page through injected 5xx and resets', async () => {
    const ws = sim.workspace('acme');
    ws.resetStats();
    ws.setFaults({ errorRate: 0.3, resetRate: 0.1 });
    const ids: string[] = [];
    const c = client();
    for await (const r of c.records('deals', { pageSize: 7, maxRetries: 30, retryBaseDelayMs: 1, retryMaxDelayMs: 5 }))
      ids.push(r.id);
    expect(ws.stats.errors5xx).toBeGreaterThan(0);
    expect(ws.stats.resets).toBeGreaterThan(0);
    expect(ids.length).toBe(ws.deals.size);
    expect(new Set(ids)).toEqual(new Set(ws.deals.keys()));
  });
});
