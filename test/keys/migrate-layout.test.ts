import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAYOUT_VERSION, layoutKey, layoutLockKey } from '../../src/keys/index.js';
import { RunStore } from '../../src/runs/index.js';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { migrateLayout } from '../../src/runtime/migrate-layout.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';

let redis: Redis;
const prefixes: string[] = [];
beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL);
});
afterAll(async () => {
  for (const p of prefixes) await deleteKeysWithPrefix(redis, p);
  redis.disconnect();
});

function newPrefix(): string {
  const p = testPrefix('layout');
  prefixes.push(p);
  return p;
}

/** Writes what version 1 (no hash tags) left for one completed run of 150 rows, and its queue. */
async function writeV1(p: string, id: string): Promise<void> {
  const created = Date.parse('2026-11-20T10:00:00Z');
  await redis.hset(`${p}:run:${id}`, {
    id,
    workspace: 'acme',
    operation: 'deal.update',
    source: 'deals.csv',
    status: 'completed',
    createdAt: new Date(created).toISOString(),
    createdMs: String(created),
    total: '150',
    succeeded: '149',
    failed: '1',
    producerDone: '1',
    maxRow: '150',
    columns: '["id"]',
    options: '{}',
  });
  await redis.hset(`${p}:run:${id}:results:0`, '1', 's{"l":2,"d":"d1","t":1}');
  await redis.hset(`${p}:run:${id}:results:1`, '150', 'f{"l":151,"c":"CRM_NOT_FOUND","m":"gone","t":1}');
  await redis.zadd(`${p}:run:${id}:problems`, 150, '150');
  await redis.zadd(`${p}:runs`, created, id);
  await redis.zadd(`${p}:runs:status:completed`, created, id);
  await redis.zadd(`${p}:workspace:acme:runs`, created, id);
  await redis.hset(`${p}:ws:acme:holds`, 'paused', '{"reason":"by hand","since":"2026-11-20T10:00:00Z"}');
  await redis.set(`${p}:ws:acme:claim:d1`, `${id}/1`);
  await redis.hset(`${p}:q:acme:meta`, 'opts.maxLenEvents', '10000');
  await redis.rpush(`${p}:q:acme:wait`, 'job-1');
  await redis.set(`${p}:generation`, 'g@1');
}

describe('the key layout migration (version 1 → 2)', () => {
  it('moves a run, its results and indexes, the workspace keys and the queue under the workspace tag', async () => {
    const p = newPrefix();
    const id = '20261120-100000-000-000abcde';
    await writeV1(p, id);
    expect(await migrateLayout(redis, p)).toEqual({ runs: 1, keys: 8 });
    expect(await redis.get(layoutKey(p))).toBe(String(LAYOUT_VERSION));

    const store = new RunStore({ redis, prefix: p });
    expect(await store.getRun(id)).toMatchObject({ workspace: 'acme', status: 'completed' });
    expect((await store.getResult(id, 150))?.message).toBe('gone');
    expect((await store.problems(id)).rows.map((r) => r.row)).toEqual([150]);
    expect((await store.listRuns({ status: 'completed' })).runs.map((r) => r.id)).toEqual([id]);
    expect((await store.listRuns({ workspace: 'acme' })).total).toBe(1);
    expect(Object.keys(await store.holds('acme'))).toEqual(['paused']);
    expect(await redis.lrange(`${p}:q:{acme}:wait`, 0, -1)).toEqual(['job-1']);
    expect(await redis.get(`${p}:ws:{acme}:claim:d1`)).toBe(`${id}/1`);
    // Nothing left under the old names.
    expect(await redis.keys(`${p}:run:${id}*`)).toEqual([]);
    expect(await redis.keys(`${p}:ws:acme:*`)).toEqual([]);
    expect(await redis.keys(`${p}:q:acme:*`)).toEqual([]);
    expect(await redis.exists(`${p}:runs:status:completed`, `${p}:workspace:acme:runs`)).toBe(0);

    // Once is enough: the next process finds the marker.
    expect(await migrateLayout(redis, p)).toBeNull();
  });

  it('can be run again after dying half-way: what moved is skipped, the rest moves', async () => {
    const p = newPrefix();
    const id = '20261120-100000-000-000fghij';
    await writeV1(p, id);
    // Died after moving the results but before the record.
    await redis.rename(`${p}:run:${id}:results:0`, `${p}:run:{acme}:${id}:results:0`);
    expect(await migrateLayout(redis, p)).toMatchObject({ runs: 1 });
    const store = new RunStore({ redis, prefix: p });
    expect((await store.getResult(id, 1))?.recordId).toBe('d1');
    expect((await store.getResult(id, 150))?.status).toBe('failed');
  });

  it('marks a fresh prefix without looking further, and refuses a layout newer than it knows', async () => {
    const fresh = newPrefix();
    expect(await migrateLayout(redis, fresh)).toBeNull();
    expect(await redis.get(layoutKey(fresh))).toBe(String(LAYOUT_VERSION));

    const newer = newPrefix();
    await redis.set(layoutKey(newer), String(LAYOUT_VERSION + 1));
    await expect(migrateLayout(redis, newer)).rejects.toMatchObject({ code: 'REDIS_LAYOUT' });
  });

  it('one process of the fleet moves the keys: another one waits for its marker, and says so if it never comes', async () => {
    const p = newPrefix();
    await writeV1(p, '20261120-100000-000-000klmno');
    await redis.set(layoutLockKey(p), 'another process', 'PX', 60_000);
    const waiting = migrateLayout(redis, p, { waitMs: 5000 });
    await new Promise((r) => setTimeout(r, 300));
    expect(await redis.exists(`${p}:run:20261120-100000-000-000klmno`)).toBe(1); // it did not start moving
    await redis.set(layoutKey(p), String(LAYOUT_VERSION)); // the other process is done
    expect(await waiting).toBeNull();

    const stuck = newPrefix();
    await writeV1(stuck, '20261120-100000-000-000pqrst');
    await redis.set(layoutLockKey(stuck), 'a process that died', 'PX', 60_000);
    await expect(migrateLayout(redis, stuck, { waitMs: 600 })).rejects.toMatchObject({
      code: 'REDIS_LAYOUT',
      message: expect.stringContaining(`delete ${layoutLockKey(stuck)}`),
    });
  });
});
