import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { syncLockKey } from '../../src/keys/index.js';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { SyncLock } from '../../src/schedule/sync-lock.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';

const redis = new Redis(TEST_REDIS_URL, { lazyConnect: false });
const prefix = testPrefix('sync-lock');

afterAll(async () => {
  await deleteKeysWithPrefix(redis, prefix);
  await redis.quit();
});

describe('SyncLock (release-sync-lock, extend-sync-lock)', () => {
  it('has one holder at a time; a release frees it for the next', async () => {
    const a = new SyncLock(redis, prefix, 'one');
    const b = new SyncLock(redis, prefix, 'one');
    expect(await a.acquire()).toBe(true);
    expect(await b.acquire()).toBe(false);
    expect(await a.held()).toBe(true);
    await a.release();
    expect(await redis.exists(syncLockKey(prefix, 'one'))).toBe(0);
    expect(await b.acquire()).toBe(true);
    await b.release();
  });

  it('a release by a holder whose lock was taken over leaves the new holder its lock', async () => {
    const a = new SyncLock(redis, prefix, 'two', 60_000);
    const b = new SyncLock(redis, prefix, 'two', 60_000);
    expect(await a.acquire()).toBe(true);
    await redis.del(syncLockKey(prefix, 'two')); // as if it had expired
    expect(await b.acquire()).toBe(true);
    await a.release();
    expect(await b.held()).toBe(true);
    expect(await redis.pttl(syncLockKey(prefix, 'two'))).toBeGreaterThan(50_000);
    await b.release();
  });

  it('is renewed while held, past its ttl', async () => {
    const a = new SyncLock(redis, prefix, 'three', 600);
    expect(await a.acquire()).toBe(true);
    await sleep(1500);
    expect(a.lost).toBe(false);
    expect(await a.held()).toBe(true);
    expect(await redis.pttl(syncLockKey(prefix, 'three'))).toBeGreaterThan(0);
    await a.release();
  });

  it('is lost, in words, when another holder has it: the renewal does not take it back', async () => {
    const a = new SyncLock(redis, prefix, 'four', 300);
    expect(await a.acquire()).toBe(true);
    await redis.set(syncLockKey(prefix, 'four'), 'another-holder', 'PX', 60_000);
    // Renewals run every ttl/3; a loaded machine may run them late.
    for (let waited = 0; !a.lost && waited < 5000; waited += 50) await sleep(50);
    expect(a.lost).toBe(true);
    expect(a.lostReason).toMatch(/taken over or removed/);
    expect(await a.held()).toBe(false);
    expect(await redis.get(syncLockKey(prefix, 'four'))).toBe('another-holder');
    expect(await redis.pttl(syncLockKey(prefix, 'four'))).toBeGreaterThan(50_000);
    await a.release();
    expect(await redis.get(syncLockKey(prefix, 'four'))).toBe('another-holder');
  });
});
