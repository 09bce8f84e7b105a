import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { AuthError, CrmClient, TransientError, type CrmClientOptions } from '../../src/crm/index.js';
import { startSimulator, type Simulator, type SimWorkspace } from '../../src/sim/index.js';
import { startCrmFaultProxy, type CrmFaultProxy, type ProxiedRequest } from './crm-fault-proxy.js';
import { httpRequest } from './http.js';

/** Every behaviour of the CRM fault proxy, with the real CrmClient → proxy → real simulator. */

const KEY = 'k-acme-fault-proxy';
const DEALS = /\/v2\/deals$/;
let sim: Simulator;
let ws: SimWorkspace;
let proxy: CrmFaultProxy;
const clients: CrmClient[] = [];

beforeAll(async () => {
  sim = await startSimulator({
    port: 0,
    workspaces: [
      { name: 'acme', apiKeys: [KEY], records: 5, seed: 3, rateLimit: null },
      { name: 'globex', apiKeys: ['k-globex'], records: 1, seed: 4, rateLimit: null },
    ],
  });
  ws = sim.workspace('acme');
});
beforeEach(async () => {
  proxy = await startCrmFaultProxy({ upstreamPort: sim.port });
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await proxy.close();
});
afterAll(async () => {
  await sim?.close();
});

function client(extra: Partial<CrmClientOptions> = {}): CrmClient {
  const c = new CrmClient({ workspace: 'acme', baseUrl: proxy.baseUrl('acme'), apiKey: new Secret(KEY), ...extra });
  clients.push(c);
  return c;
}

/** Straight to the simulator, to compare with what comes through the proxy. */
function direct(): CrmClient {
  const c = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl('acme'), apiKey: new Secret(KEY) });
  clients.push(c);
  return c;
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => Promise.reject(new Error('expected the call to fail')),
    (e: unknown) => e,
  );
}

const uniqueName = (): string => `fault-proxy ${randomUUID()}`;
const dealsNamed = (name: string) => [...ws.deals.values()].filter((d) => d.name === name);

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await sleep(10);
  }
}

const settled = (r: ProxiedRequest | undefined): boolean => r !== undefined && r.outcome !== 'pending';

describe('crm fault proxy', () => {
  it('without rules forwards requests and the Host header unchanged, and logs them', async () => {
    const truth = await direct().listPage('deals', { pageNumber: 1, pageSize: 5 });
    const before = ws.stats.requests;
    const page = await client().listPage('deals', { pageNumber: 1, pageSize: 5 });
    expect(page.records).toEqual(truth.records);
    const name = uniqueName();
    const deal = await client().createDeal({ name });
    expect(dealsNamed(name).map((d) => d.id)).toEqual([deal.id]);
    expect(ws.stats.requests).toBe(before + 2);
    // The Host names the workspace: acme's key is refused by globex, so the Host went through as sent.
    const wrongWorkspace = new CrmClient({
      workspace: 'globex',
      baseUrl: proxy.baseUrl('globex'),
      apiKey: new Secret(KEY),
    });
    clients.push(wrongWorkspace);
    expect(await failure(wrongWorkspace.listPage('deals', { pageNumber: 1, pageSize: 1 }))).toBeInstanceOf(AuthError);
    expect(proxy.requests.map((r) => [r.method, r.path, r.outcome])).toEqual([
      ['GET', '/api/external/v2/deals', 'answered'],
      ['POST', '/api/external/v2/deals', 'answered'],
      ['GET', '/api/external/v2/deals', 'answered'],
    ]);
    expect(proxy.requests.every((r) => typeof r.forwardedAt === 'number')).toBe(true);
    expect(proxy.count('POST', DEALS)).toBe(1);
    expect(proxy.count('get')).toBe(2);
    expect(proxy.count()).toBe(3);
  });

  it('fail502 answers 502 without forwarding; rules go in order, filter by method and path, and honour times', async () => {
    proxy.setRules([
      { method: 'GET', path: /\/v2\/leads$/, fail502: true },
      { method: 'POST', path: DEALS, fail502: true, times: 1 },
    ]);
    expect(proxy.unspent()).toBe(1); // the unlimited leads rule owes nothing
    const before = ws.stats.requests;
    const name = uniqueName();
    const err = await failure(client().createDeal({ name }));
    expect(proxy.unspent()).toBe(0);
    expect(err).toBeInstanceOf(TransientError);
    expect(err).toMatchObject({ status: 502, serviceMessage: 'bad gateway' });
    expect(ws.stats.requests).toBe(before); // the simulator never saw it
    expect(dealsNamed(name)).toHaveLength(0);
    expect(proxy.count('POST', DEALS)).toBe(0);
    await client().createDeal({ name }); // times: 1 is used up
    expect(dealsNamed(name)).toHaveLength(1);
    expect(await failure(client().listPage('leads', { pageNumber: 1, pageSize: 1 }))).toMatchObject({ status: 502 });
    await client().listPage('deals', { pageNumber: 1, pageSize: 1 }); // path does not match the leads rule
    expect(proxy.requests.map((r) => r.outcome)).toEqual(['fail502', 'answered', 'fail502', 'answered']);
    expect(proxy.requests.map((r) => r.forwardedAt === null)).toEqual([true, false, true, false]);
    // The union type lets two behaviours through in one literal; setRules refuses it at run time.
    expect(() => proxy.setRules([{ fail502: true, holdAnswer: 5 }])).toThrow(/exactly one/);
  });

  it('applyAndDrop on POST /v2/deals: the client gets a transport error, yet the simulator holds the deal', async () => {
    proxy.setRules([{ method: 'POST', path: DEALS, applyAndDrop: true, times: 1 }]);
    const name = uniqueName();
    const err = await failure(client().createDeal({ name }));
    expect(err).toBeInstanceOf(TransientError);
    expect((err as TransientError).status).toBeUndefined(); // no HTTP answer at all
    expect(dealsNamed(name)).toHaveLength(1);
    expect(proxy.requests[0]?.outcome).toBe('dropped');
    expect(proxy.count('POST', DEALS)).toBe(1);
  });

  it('holdRequest longer than the client timeout: the client times out and the deal appears afterwards', async () => {
    proxy.setRules([{ method: 'POST', path: DEALS, holdRequest: 1000 }]);
    const name = uniqueName();
    const started = Date.now();
    const err = await failure(client({ timeoutMs: 300 }).createDeal({ name }));
    expect(err).toBeInstanceOf(TransientError);
    expect(Date.now() - started).toBeLessThan(900);
    expect(dealsNamed(name)).toHaveLength(0); // still in the "network"
    await until(() => dealsNamed(name).length === 1);
    const entry = proxy.requests[0];
    expect((entry?.forwardedAt ?? 0) - started).toBeGreaterThanOrEqual(950);
    await until(() => settled(entry));
    expect(entry?.outcome).toBe('client-gone');
  });

  it('holdAnswer: applied at once; the answer comes late, or is dropped when the client gave up', async () => {
    proxy.setRules([{ method: 'POST', path: DEALS, holdAnswer: 400 }]);
    const late = uniqueName();
    const started = Date.now();
    const deal = await client().createDeal({ name: late });
    expect(Date.now() - started).toBeGreaterThanOrEqual(380);
    expect(deal.name).toBe(late);

    proxy.setRules([{ method: 'POST', path: DEALS, holdAnswer: 1000 }]);
    const lost = uniqueName();
    expect(await failure(client({ timeoutMs: 300 }).createDeal({ name: lost }))).toBeInstanceOf(TransientError);
    const entry = proxy.requests[1];
    expect(dealsNamed(lost)).toHaveLength(1); // applied before the client gave up
    expect(entry?.outcome).toBe('pending'); // its answer is still held
    await until(() => settled(entry));
    expect(entry?.outcome).toBe('client-gone');
  });

  it('rewriteBody changes the JSON body before forwarding, with a recomputed Content-Length', async () => {
    proxy.setRules([
      {
        method: 'POST',
        path: DEALS,
        // CRM automation: names are normalised and every new deal is marked won.
        rewriteBody: (json) => {
          const body = json as { deal: { name: string } };
          return { deal: { ...body.deal, name: body.deal.name.replace(/ {2,}/g, ' '), status: 'won' } };
        },
      },
    ]);
    const id = randomUUID();
    // The body shrinks: a stale Content-Length would leave the simulator waiting for bytes (timeout).
    const deal = await client({ timeoutMs: 2000 }).createDeal({ name: `Big   deal  ${id}`, status: 'in_progress' });
    expect(deal).toMatchObject({ name: `Big deal ${id}`, status: 'won' });
    expect(dealsNamed(`Big deal ${id}`)).toMatchObject([{ status: 'won' }]);
  });

  it('skewClockMs shifts the Date header and every created_at/updated_at of the answer', async () => {
    const truth = await direct().listPage('deals', { pageNumber: 1, pageSize: 5 });
    for (const skew of [-90_000, 3_600_000]) {
      proxy.skewClockMs = skew;
      const seen = await client().listPage('deals', { pageNumber: 1, pageSize: 5 });
      expect(seen.records).toEqual(
        truth.records.map((d) => ({
          ...d,
          created_at: new Date(Date.parse(d.created_at) + skew).toISOString(),
          updated_at: new Date(Date.parse(d.updated_at) + skew).toISOString(),
        })),
      );
      const raw = await httpRequest({
        port: proxy.port,
        path: '/api/external/v2/deals?page_size=1',
        host: `acme.localhost:${proxy.port}`,
        headers: { 'x-api-key': KEY },
      });
      const shifted = Date.parse(String(raw.headers.date)) - Date.now();
      // The Date header has 1 s resolution.
      expect(shifted).toBeGreaterThan(skew - 2000);
      expect(shifted).toBeLessThan(skew + 1000);
    }
    proxy.setRules([{ fail502: true, times: 1 }]); // the proxy's own answers run on the same skewed clock
    const own = await httpRequest({
      port: proxy.port,
      path: '/api/external/v2/deals',
      host: `acme.localhost:${proxy.port}`,
    });
    expect(own.status).toBe(502);
    expect(own.json).toEqual({ error: 'bad gateway' });
    expect(Date.parse(String(own.headers.date)) - Date.now()).toBeGreaterThan(3_600_000 - 2000);
  });
});
