import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { SessionStore } from '../../src/dashboard/session-store.js';
import { sessionKey } from '../../src/keys/index.js';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';

const redis = new Redis(TEST_REDIS_URL, { lazyConnect: false });
const prefix = testPrefix('sessions');
const store = new SessionStore({ redis, prefix, fingerprint: 'fp', ttlMs: 10_000, idleMs: 1_000 });
const keyOf = (sid: string) => sessionKey(prefix, 'fp', createHash('sha256').update(sid).digest('hex'));

afterAll(async () => {
  await deleteKeysWithPrefix(redis, prefix);
  await redis.quit();
});

describe('SessionStore.touch (touch-session)', () => {
  it('keeps a live session the idle time more on each use', async () => {
    const t0 = Date.now();
    const sid = await store.create(t0);
    await redis.pexpire(keyOf(sid), 200);
    expect(await store.touch(sid, t0 + 500)).toBe(true);
    const ttl = await redis.pttl(keyOf(sid));
    expect(ttl).toBeGreaterThan(500); // was 200 before the touch
    expect(ttl).toBeLessThanOrEqual(1000);
  });

  it('never slides a session past its absolute end', async () => {
    const t0 = Date.now();
    const sid = await store.create(t0);
    expect(await store.touch(sid, t0 + 9_700)).toBe(true);
    expect(await redis.pttl(keyOf(sid))).toBeLessThanOrEqual(300);
  });

  it('ends a session at its absolute end, removing its key', async () => {
    const t0 = Date.now();
    const sid = await store.create(t0);
    expect(await store.touch(sid, t0 + 10_000)).toBe(false);
    expect(await redis.exists(keyOf(sid))).toBe(0);
  });

  it('refuses an unknown, revoked or unreadable session', async () => {
    expect(await store.touch('no-such-session')).toBe(false);
    const sid = await store.create();
    await store.revoke(sid);
    expect(await store.touch(sid)).toBe(false);
    const odd = await store.create();
    await redis.set(keyOf(odd), 'not a time', 'PX', 5_000);
    expect(await store.touch(odd)).toBe(false);
    expect(await redis.exists(keyOf(odd))).toBe(0);
  });
});
