import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTH_ERROR, startSimulator, workspaceFromHost, type Simulator } from '../../src/sim/index.js';
import { httpRequest } from '../helpers/http.js';
import { client, errorOf } from './sim-fixture.js';

let sim: Simulator;

beforeAll(async () => {
  sim = await startSimulator({
    workspaces: [
      { name: 'acme', apiKeys: ['acme-key', 'acme-key-2'], records: 3 },
      { name: 'globex', apiKeys: ['globex-key'], records: 2 },
    ],
  });
});
afterAll(() => sim.close());

const EXACT_401 = '{"error":"Could not authenticate, invalid API Key"}';

describe('workspace routing and authentication', () => {
  it('answers a valid key of the addressed workspace', async () => {
    const res = await client(sim, 'acme', 'acme-key').get('v2/contacts');
    expect(res.status).toBe(200);
    expect((res.json as { contacts: unknown[] }).contacts).toHaveLength(3);
    const other = await client(sim, 'globex', 'globex-key').get('v2/contacts');
    expect((other.json as { contacts: unknown[] }).contacts).toHaveLength(2);
  });

  it.each([
    ['missing key', 'acme', null],
    ['wrong key', 'acme', 'nope'],
    ["another workspace's key", 'acme', 'globex-key'],
    ['unknown subdomain', 'initech', 'acme-key'],
    ['empty key', 'acme', ''],
  ])('401 with the exact body for a %s', async (_case, workspace, key) => {
    const res = await client(sim, workspace, key).get('v2/deals');
    expect(res.status).toBe(401);
    expect(res.text).toBe(EXACT_401);
    expect(errorOf(res)).toBe(AUTH_ERROR);
  });

  it('401 without a workspace subdomain (bare localhost or an IP)', async () => {
    for (const host of [`localhost:${sim.port}`, `127.0.0.1:${sim.port}`, `acme.example.com`]) {
      const res = await httpRequest({
        port: sim.port,
        host,
        path: '/api/external/v2/deals',
        headers: { 'x-api-key': 'acme-key' },
      });
      expect(res.status).toBe(401);
      expect(res.text).toBe(EXACT_401);
    }
  });

  it('401 for a revoked key, 200 for a key added at run time', async () => {
    const ws = sim.workspace('acme');
    const c = client(sim, 'acme', 'acme-key-2');
    expect((await c.get('v2/leads')).status).toBe(200);
    ws.revokeApiKey('acme-key-2');
    const res = await c.get('v2/leads');
    expect(res.status).toBe(401);
    expect(res.text).toBe(EXACT_401);
    ws.addApiKey('acme-key-2');
    expect((await c.get('v2/leads')).status).toBe(200);
  });

  it('401 on write endpoints too, and nothing is written', async () => {
    const ws = sim.workspace('acme');
    const before = ws.deals.size;
    const res = await client(sim, 'acme', 'globex-key').post('v2/deals', { deal: { name: 'Sneaky' } });
    expect(res.status).toBe(401);
    expect(ws.deals.size).toBe(before);
  });

  it('unknown paths answer 404 {error} before authentication', async () => {
    for (const path of ['v2/companies', 'v3/deals', 'v2/deals/x/y']) {
      const res = await client(sim, 'acme', null).get(path);
      expect(res.status).toBe(404);
      expect(errorOf(res)).toMatch(/No route/);
    }
    const wrongMethod = await client(sim, 'acme', 'acme-key').call('DELETE', 'v2/deals/abc');
    expect(wrongMethod.status).toBe(404);
  });

  it('counts every request of a known workspace by status, 401s included', async () => {
    const ws = sim.workspace('globex');
    ws.resetStats();
    await client(sim, 'globex', 'globex-key').get('v2/deals');
    await client(sim, 'globex', 'bad').get('v2/deals');
    await client(sim, 'globex', 'globex-key').get('v9/deals');
    expect(ws.stats.requests).toBe(3);
    expect(ws.stats.byStatus).toEqual({ 200: 1, 401: 1, 404: 1 });
    expect(ws.stats.listPages).toBe(1);
  });

  it('baseUrl and origin name the workspace and the port', () => {
    expect(sim.baseUrl('acme')).toBe(`http://acme.localhost:${sim.port}/api/external`);
    expect(sim.origin).toBe(`http://127.0.0.1:${sim.port}`);
    expect(() => sim.workspace('nope')).toThrow(/no workspace/);
  });

  it('addWorkspace serves a new workspace at once and refuses a duplicate name', async () => {
    sim.addWorkspace({ name: 'hooli', apiKeys: ['h'], records: 1 });
    expect((await client(sim, 'hooli', 'h').get('v1/deals')).status).toBe(200);
    expect(() => sim.addWorkspace({ name: 'hooli', apiKeys: [] })).toThrow(/already exists/);
  });
});

describe('workspaceFromHost', () => {
  it.each([
    ['acme.localhost:4010', 'acme'],
    ['ACME.localhost', 'acme'],
    ['a.b.localhost:1', 'a'],
    ['acme.localhost.:80', 'acme'],
    ['localhost:4010', undefined],
    ['127.0.0.1:4010', undefined],
    ['acme.example.com', undefined],
    ['[::1]:4010', undefined],
    [undefined, undefined],
  ])('%s → %s', (host, expected) => {
    expect(workspaceFromHost(host)).toBe(expected);
  });

  // --domain sim: a container network's alias acme.sim reaches the simulator, and *.localhost
  // (each container's own loopback) still works where it is the simulator's.
  it.each([
    ['acme.sim:4010', 'acme'],
    ['ACME.SIM.', 'acme'],
    ['acme.localhost:4010', 'acme'],
    ['sim:4010', undefined],
    ['acme.notsim:4010', undefined],
    ['acme.sim.example.com', undefined],
  ])('with domain sim: %s → %s', (host, expected) => {
    expect(workspaceFromHost(host, 'sim')).toBe(expected);
  });
});
