import { Agent } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator, TokenBucket, type Simulator, type SimWorkspace } from '../../src/sim/index.js';
import { client, errorOf } from './sim-fixture.js';

let sim: Simulator;
let ws: SimWorkspace;
let api: ReturnType<typeof client>;

beforeAll(async () => {
  sim = await startSimulator({
    workspaces: [
      { name: 'acme', apiKeys: ['k'], records: 5 },
      { name: 'calm', apiKeys: ['c'], records: 1 },
    ],
  });
  ws = sim.workspace('acme');
  api = client(sim, 'acme', 'k');
});
afterAll(() => sim.close());
beforeEach(() => {
  sim.setFaults({});
  sim.setLatency(0);
  for (const name of ['acme', 'calm']) {
    sim.workspace(name).setFaults(null);
    sim.workspace(name).setRateLimit(null);
    sim.workspace(name).resetStats();
  }
});

describe('rate limit', () => {
  it('429 {error} with an integer Retry-After once the bucket is empty, counted', async () => {
    ws.setRateLimit({ max: 2, windowMs: 60_000 });
    expect((await api.get('v2/deals')).status).toBe(200);
    expect((await api.get('v2/deals')).status).toBe(200);
    const res = await api.get('v2/deals');
    expect(res.status).toBe(429);
    expect(errorOf(res)).toMatch(/rate limit/i);
    const retryAfter = Number(res.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(30);
    expect(ws.stats.rateLimited).toBe(1);
    expect(ws.stats.byStatus[429]).toBe(1);
    expect(ws.stats.requests).toBe(3);
  });

  it('a 429 applies no write; 401s do not use tokens; other workspaces are not limited', async () => {
    ws.setRateLimit({ max: 1, windowMs: 60_000 });
    await client(sim, 'acme', 'wrong').get('v2/deals');
    expect((await api.get('v2/deals')).status).toBe(200);
    const before = ws.deals.size;
    expect((await api.post('v2/deals', { deal: { name: 'x' } })).status).toBe(429);
    expect(ws.deals.size).toBe(before);
    expect((await client(sim, 'calm', 'c').get('v2/deals')).status).toBe(200);
  });

  it('setRateLimit(null) lifts the limit', async () => {
    ws.setRateLimit({ max: 1, windowMs: 60_000 });
    await api.get('v2/deals');
    expect((await api.get('v2/deals')).status).toBe(429);
    ws.setRateLimit(null);
    expect((await api.get('v2/deals')).status).toBe(200);
  });

  it('token bucket refills max per window and says how long until the next token', () => {
    const bucket = new TokenBucket({ max: 10, windowMs: 1000 }, 0);
    for (let i = 0; i < 10; i++) expect(bucket.take(0)).toBe(0);
    expect(bucket.take(0)).toBe(100);
    expect(bucket.take(50)).toBe(50);
    expect(bucket.take(100)).toBe(0);
    expect(bucket.take(100)).toBe(100);
    expect(bucket.take(10_000)).toBe(0);
  });
});

describe('faults', () => {
  it('errorRate 1: 500/502/503 {error}, nothing applied, counted', async () => {
    ws.setFaults({ errorRate: 1 });
    const before = ws.deals.size;
    for (let i = 0; i < 6; i++) {
      const res = await api.post('v2/deals', { deal: { name: `e${i}` } });
      expect([500, 502, 503]).toContain(res.status);
      expect(errorOf(res)).toBeTruthy();
    }
    expect(ws.deals.size).toBe(before);
    expect(ws.stats.writes.dealCreate).toBe(0);
    expect(ws.stats.errors5xx).toBe(6);
  });

  it('resetRate 1: the connection drops without an answer and nothing is applied', async () => {
    ws.setFaults({ resetRate: 1 });
    const id = [...ws.deals.keys()][0] ?? '';
    const name = ws.deals.get(id)?.name;
    await expect(api.patch(`v2/deals/${id}`, { deal: { name: 'reset' } })).rejects.toThrow(/socket hang up|ECONNRESET/);
    await expect(api.get('v2/deals')).rejects.toThrow();
    expect(ws.deals.get(id)?.name).toBe(name);
    expect(ws.stats.resets).toBe(2);
    expect(ws.stats.byStatus).toEqual({});
  });

  it('commitThenDropRate 1: the write is applied, then the connection drops; reads still answer', async () => {
    ws.setFaults({ commitThenDropRate: 1 });
    const before = ws.deals.size;
    await expect(api.post('v2/deals', { deal: { name: 'Committed' } })).rejects.toThrow(/socket hang up|ECONNRESET/);
    expect(ws.deals.size).toBe(before + 1);
    expect([...ws.deals.values()].at(-1)?.name).toBe('Committed');
    expect(ws.stats.writes.dealCreate).toBe(1);
    expect(ws.stats.drops).toBe(1);
    expect((await api.get('v2/deals')).status).toBe(200);
    // A refused write applies nothing, so there is nothing to drop: the 422 is answered.
    expect((await api.post('v2/deals', { deal: {} })).status).toBe(422);
  });

  it('global faults apply to workspaces without their own; a workspace override wins', async () => {
    sim.setFaults({ errorRate: 1 });
    expect((await client(sim, 'calm', 'c').get('v2/deals')).status).toBeGreaterThanOrEqual(500);
    sim.workspace('calm').setFaults({});
    expect((await client(sim, 'calm', 'c').get('v2/deals')).status).toBe(200);
  });

  it('faults hit only authenticated requests', async () => {
    ws.setFaults({ errorRate: 1, resetRate: 1 });
    const res = await client(sim, 'acme', 'wrong').get('v2/deals');
    expect(res.status).toBe(401);
    expect(ws.stats.errors5xx).toBe(0);
  });

  it('fault rates outside 0..1 are refused', () => {
    expect(() => sim.setFaults({ errorRate: 2 })).toThrow();
    expect(() => ws.setFaults({ resetRate: -0.1 })).toThrow();
  });
});

describe('latency and connections', () => {
  it('answers correctly with latency set', async () => {
    sim.setLatency(20);
    const res = await api.get('v2/contacts?page_size=2');
    expect(res.status).toBe(200);
    expect((res.json as { contacts: unknown[] }).contacts).toHaveLength(2);
    expect(() => sim.setLatency(-1)).toThrow();
  });

  it('keeps sockets alive between requests, and close() ends with idle keep-alive sockets open', async () => {
    const own = await startSimulator({ workspaces: [{ name: 'ka', apiKeys: ['x'] }] });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const c = client(own, 'ka', 'x', agent);
      const sockets = new Set<unknown>();
      agent.on('free', (socket) => sockets.add(socket));
      const a = await c.get('v2/deals');
      const b = await c.get('v2/leads');
      expect(a.headers.connection).toBe('keep-alive');
      expect(b.status).toBe(200);
      expect(sockets.size).toBe(1);
    } finally {
      await own.close();
      agent.destroy();
    }
    await expect(client(own, 'ka', 'x').get('v2/deals')).rejects.toThrow(/ECONNREFUSED/);
  });
});
