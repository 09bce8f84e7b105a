import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { CrmClient } from '../../src/crm/index.js';
import { RunKeys } from '../../src/keys/index.js';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { LookupPassBoard } from '../../src/runs/index.js';
import { startSimulator, type SimWorkspace } from '../../src/sim/index.js';
import {
  decodeBeforeSnapshot,
  encodeBeforeSnapshot,
  MAX_BEFORE_SNAPSHOT_JSON_BYTES,
} from '../../src/worker/before-snapshot.js';
import { DriftCheck } from '../../src/worker/drift-check.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';

/*
 * A plain import's before-values from one pass per workspace, not one per worker process
 * (DriftCheck with `beforeBoards`): two DriftChecks stand in for two processes — each its own
 * CRM client, budget and Redis connection, sharing only Redis and the CRM — against the
 * simulator over HTTP, its list requests counted where they arrive.
 */

const PAGE = 10;
const RECORDS = 60;
const prefix = testPrefix('shared-before');
let sim: Awaited<ReturnType<typeof startSimulator>>;
const opened: Array<{ close(): void }> = [];
const connections: Redis[] = [];
beforeAll(async () => {
  sim = await startSimulator({
    port: 0,
    workspaces: ['acme', 'beta'].map((name, i) => ({
      name,
      apiKeys: [`k-${name}`],
      records: RECORDS,
      seed: 11 + i,
      rateLimit: null,
    })),
  });
});
afterAll(async () => {
  for (const c of opened) c.close();
  const redis = new Redis(TEST_REDIS_URL);
  await deleteKeysWithPrefix(redis, prefix);
  await redis.quit();
  await Promise.all(connections.map((r) => r.quit()));
  await sim?.close();
});

let workspaces = 0;
/** A workspace's key space of its own per test: the simulator's workspace under a fresh name in Redis. */
function keySpace(): string {
  return `ws${++workspaces}`;
}

/** One worker process's DriftCheck of sim workspace `crm`, sharing before-value passes as workspace `ws` in Redis. */
function process_(ws: string, crm: 'acme' | 'beta' = 'acme', beforeMaxAgeMs = 60_000) {
  const redis = new Redis(TEST_REDIS_URL);
  connections.push(redis);
  const client = new CrmClient({ workspace: crm, baseUrl: sim.baseUrl(crm), apiKey: new Secret(`k-${crm}`) });
  opened.push(client);
  const budget = { taken: 0, take: async () => void budget.taken++ };
  const drift = new DriftCheck({
    client,
    budget,
    maxAgeMs: 10_000,
    beforeMaxAgeMs,
    pageSize: PAGE,
    beforeBoards: (before) => new LookupPassBoard({ redis, prefix, workspace: ws, before }),
  });
  return { drift, budget, redis };
}

const sw = (name: 'acme' | 'beta'): SimWorkspace => sim.workspace(name);
const listPages = (name: 'acme' | 'beta' = 'acme') => sw(name).stats.listPages;
/** A whole pass: every page, and the empty one after. */
const PASS = Math.ceil(RECORDS / PAGE) + 1;
const contactIds = (name: 'acme' | 'beta' = 'acme') => [...sw(name).contacts.keys()];
let runs = 0;
const newRun = () => `run-shared-${++runs}`;

describe('DriftCheck: before-value passes shared by the worker processes of a workspace', () => {
  it("a second process gets before-values from the first's pass without a list request of its own", async () => {
    const ws = keySpace();
    const [a, b] = [process_(ws), process_(ws)];
    const run = newRun();
    const [x, y] = contactIds();
    const before = listPages();
    expect((await a.drift.values(run, 'contacts', x!))?.name).toBe(sw('acme').contacts.get(x!)!.name);
    expect(listPages() - before).toBe(PASS);
    // The other process: values of the same pass, and no request at the CRM.
    const got = await b.drift.values(run, 'contacts', y!);
    expect(got?.name).toBe(sw('acme').contacts.get(y!)!.name);
    expect(got).toEqual(await a.drift.values(run, 'contacts', y!));
    expect(listPages() - before).toBe(PASS);
    expect(b.budget.taken).toBe(0);
    expect(b.drift.stats.pages).toBe(0);
    expect(b.drift.sharing.loaded).toBe(1);
    // Its later rows find it without waiting.
    expect(b.drift.freshValues(run, 'contacts', x!)?.values?.name).toBe(sw('acme').contacts.get(x!)!.name);
  });

  it('processes asking together read the list once: one runs the pass, the other waits for it', async () => {
    const ws = keySpace();
    const [a, b] = [process_(ws), process_(ws)];
    const run = newRun();
    const [x, y] = contactIds();
    const before = listPages();
    const [va, vb] = await Promise.all([a.drift.values(run, 'contacts', x!), b.drift.values(run, 'contacts', y!)]);
    expect(va?.name).toBe(sw('acme').contacts.get(x!)!.name);
    expect(vb?.name).toBe(sw('acme').contacts.get(y!)!.name);
    expect(listPages() - before).toBe(PASS);
    expect(a.budget.taken + b.budget.taken).toBe(PASS);
  });

  it('reads anew once the shared pass is stale, and sees what changed since', async () => {
    const ws = keySpace();
    const [a, b] = [process_(ws, 'acme', 50), process_(ws, 'acme', 50)];
    const run = newRun();
    const [, , x] = contactIds();
    await a.drift.values(run, 'contacts', x!);
    const before = listPages();
    sw('acme').updateRecord('contacts', x!, { name: 'Renamed since the pass' });
    // Stale by then for before-values: beforeMaxAgeMs (50 ms) or BEFORE_PASS_SPACING × the pass.
    while (a.drift.freshValues(run, 'contacts', x!) !== undefined) await new Promise((r) => setTimeout(r, 20));
    expect((await b.drift.values(run, 'contacts', x!))?.name).toBe('Renamed since the pass');
    expect(listPages() - before).toBe(PASS);
    expect(b.drift.stats.passes).toBe(1);
  });

  it("a new run's first before-values come from a pass begun after it was first asked for, in any process", async () => {
    const ws = keySpace();
    const [a, b] = [process_(ws), process_(ws)];
    const [, , , x] = contactIds();
    await a.drift.values(newRun(), 'contacts', x!);
    sw('acme').updateRecord('contacts', x!, { name: 'Written by the earlier run' });
    const before = listPages();
    const later = newRun();
    // The shared pass is fresh, but began before the run was first asked for: read anew.
    expect((await b.drift.values(later, 'contacts', x!))?.name).toBe('Written by the earlier run');
    expect(listPages() - before).toBe(PASS);
    // And that pass, begun after the run's first ask, serves the first process's rows of it.
    expect((await a.drift.values(later, 'contacts', x!))?.name).toBe('Written by the earlier run');
    expect(listPages() - before).toBe(PASS);
  });

  it('a process that died holding the pass (its grant left for a whole lease) holds the others up only briefly: they read the list themselves', async () => {
    const ws = keySpace();
    const b = process_(ws);
    const run = newRun();
    const [x] = contactIds();
    // The run was asked for, then a process took the pass and died: a lease of a minute, here.
    const board = new LookupPassBoard({ redis: b.redis, prefix, workspace: ws, before: 'contacts', leaseMs: 60_000 });
    await board.runStart(run);
    expect((await board.ask(0, 'the-dead-process')).kind).toBe('run');
    const before = listPages();
    // Waiting out the dead one's lease would outlast this test's timeout (10 s).
    expect((await b.drift.values(run, 'contacts', x!))?.name).toBe(sw('acme').contacts.get(x!)!.name);
    expect(listPages() - before).toBe(PASS);
    expect(b.drift.stats.passes).toBe(1);
  }, 10_000);

  it('a board that does not answer (Redis failing) leaves the process to read the list itself', async () => {
    const dead = new Redis(TEST_REDIS_URL);
    await dead.quit();
    const client = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl('acme'), apiKey: new Secret('k-acme') });
    opened.push(client);
    const drift = new DriftCheck({
      client,
      budget: { take: async () => undefined },
      maxAgeMs: 10_000,
      pageSize: PAGE,
      beforeBoards: (before) => new LookupPassBoard({ redis: dead, prefix, workspace: keySpace(), before }),
    });
    const [x] = contactIds();
    const before = listPages();
    const run = newRun();
    expect((await drift.values(run, 'contacts', x!))?.name).toBe(sw('acme').contacts.get(x!)!.name);
    expect(listPages() - before).toBe(PASS);
    // Its own pass serves its next rows as before.
    expect(drift.freshValues(run, 'contacts', x!)).toBeDefined();
  });

  it('a board that stops answering after the run was stamped (Redis failing mid-run) leaves the process to read the list itself, and see what changed', async () => {
    const own = new Redis(TEST_REDIS_URL);
    const client = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl('acme'), apiKey: new Secret('k-acme') });
    opened.push(client);
    const ws = keySpace();
    const drift = new DriftCheck({
      client,
      budget: { take: async () => undefined },
      maxAgeMs: 10_000,
      beforeMaxAgeMs: 50,
      pageSize: PAGE,
      beforeBoards: (before) => new LookupPassBoard({ redis: own, prefix, workspace: ws, before }),
    });
    const [, , , , x] = contactIds();
    const run = newRun();
    await drift.values(run, 'contacts', x!);
    // Stamped and shared through the board: the run's passes go by it from now on.
    expect(drift.sharing.shared).toBe(1);
    own.disconnect();
    sw('acme').updateRecord('contacts', x!, { name: 'Renamed while Redis was away' });
    while (drift.freshValues(run, 'contacts', x!) !== undefined) await new Promise((r) => setTimeout(r, 20));
    const before = listPages();
    expect((await drift.values(run, 'contacts', x!))?.name).toBe('Renamed while Redis was away');
    expect(listPages() - before).toBe(PASS);
    expect(drift.stats.passes).toBe(2);
    expect(drift.sharing.shared).toBe(1);
  });

  it('a missing, corrupt, too large, foreign or other-layout snapshot is not used: the process reads the list itself', async () => {
    const keys = new RunKeys(prefix);
    const ws = keySpace();
    const writer = process_(ws);
    const run = newRun();
    const [x] = contactIds();
    await writer.drift.values(run, 'contacts', x!);
    const boardKey = keys.beforeBoard(ws, 'contacts');
    const snapKey = keys.beforeSnapshot(ws, 'contacts');
    const good = await waitFor(() => writer.redis.getBuffer(snapKey));
    const startedAt = Number(await writer.redis.hget(boardKey, 'snapStartedAt'));
    const origin = { workspace: ws, crm: sim.baseUrl('acme'), resource: 'contacts' as const, startedAt };
    const read = (await decodeBeforeSnapshot(good, origin))!;
    expect(read.index.size).toBe(RECORDS);
    const encoded = async (o: typeof origin) => {
      const e = await encodeBeforeSnapshot(o, read.durationMs, read.index);
      return 'body' in e ? e.body : undefined;
    };
    const edited = async (edit: (json: string) => string) =>
      gzipAsync(Buffer.from(edit((await gunzipAsync(good)).toString('utf8'))));
    const bodies: Array<[string, Buffer | undefined]> = [
      ['missing', undefined],
      ['not gzip', Buffer.from('not a snapshot')],
      ['cut short', good.subarray(0, Math.floor(good.length / 2))],
      ['gzip of something else', await gzipAsync(Buffer.from('{"records": 3}'))],
      ['a record of another shape', await edited((j) => j.replace(/\n.*\n/, `\n${JSON.stringify('broken')}\n`))],
      ['a record short', await edited((j) => j.replace(/[^\n]*\n$/, ''))],
      ['a line too long', await gzipAsync(Buffer.alloc(MAX_BEFORE_SNAPSHOT_JSON_BYTES + 1, 32))],
      ['too large unzipped', await tooLarge()],
      ['another workspace', await encoded({ ...origin, workspace: 'someone-else' })],
      ["another CRM's", await encoded({ ...origin, crm: sim.baseUrl('beta') })],
      ['another pass', await encoded({ ...origin, startedAt: startedAt + 1 })],
      ['another layout', await edited((j) => j.replace('crm-sync/before-pass/1', 'crm-sync/before-pass/2'))],
      ['other fields', await edited((j) => j.replace('"fields":[', '"fields":["extra",'))],
    ];
    /** The good header, then one good record line again and again past the cap (as many as the header says). */
    async function tooLarge(): Promise<Buffer> {
      const [head, line] = (await gunzipAsync(good)).toString('utf8').split('\n');
      const times = Math.ceil(MAX_BEFORE_SNAPSHOT_JSON_BYTES / (line!.length + 1)) + 1;
      const h = JSON.stringify({ ...JSON.parse(head!), records: times });
      return gzipAsync(Buffer.from(`${h}\n${`${line}\n`.repeat(times)}`));
    }
    for (const [what, body] of bodies) {
      if (body) await writer.redis.set(snapKey, body);
      else await writer.redis.del(snapKey);
      const reader = process_(ws);
      const before = listPages();
      const got = await reader.drift.values(run, 'contacts', x!);
      expect(got?.name, what).toBe(sw('acme').contacts.get(x!)!.name);
      expect(listPages() - before, what).toBe(PASS);
      expect(reader.drift.sharing.loaded, what).toBe(0);
      // Its own pass is shared in turn; the board is put back as the writer left it for the next case.
      await waitFor(async () => (reader.drift.sharing.shared > 0 ? true : undefined));
      await writer.redis.hset(boardKey, 'snapStartedAt', startedAt);
    }
    // The good one, put back, serves a process again without a request.
    await writer.redis.set(snapKey, good);
    const reader = process_(ws);
    const before = listPages();
    expect((await reader.drift.values(run, 'contacts', x!))?.name).toBe(sw('acme').contacts.get(x!)!.name);
    expect(listPages() - before).toBe(0);
  });
});

async function waitFor<T>(get: () => Promise<T | null | undefined>): Promise<T> {
  for (;;) {
    const v = await get();
    if (v !== null && v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
}

const gunzipAsync = promisify(gunzip);
const gzipAsync = promisify(gzip);
