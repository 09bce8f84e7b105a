import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/redis/index.js';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';
import { countSocketWrites as countWrites } from '../helpers/socket-writes.js';

/*
 * A connection's commands of one event-loop turn leave in one socket write (src/redis/
 * write-coalescing.ts), in order, and none waits past the turn that issued it. The writes are
 * counted where the socket hands them to the system (test/helpers/socket-writes.ts); the
 * Cluster's nodes: test/cluster/redis-cluster.test.ts.
 */

const prefix = testPrefix('coalesce');

/** `n` SETs and GETs issued together; answers the GETs' replies. */
async function setAndGet(redis: Redis, tag: string, n: number): Promise<Array<string | null>> {
  const keys = Array.from({ length: n }, (_, i) => `${prefix}:${tag}:${i}`);
  const sets = keys.map((key, i) => redis.set(key, `v${i}`));
  const gets = keys.map((key) => redis.get(key));
  await Promise.all(sets);
  return Promise.all(gets);
}

const expected = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);

describe('one socket write per turn', () => {
  let redis: Redis;
  let plain: Redis;

  beforeAll(async () => {
    redis = await connectRedis(TEST_REDIS_URL, { role: 'worker', liveness: false });
    plain = new Redis(TEST_REDIS_URL);
    await plain.ping();
  });

  afterAll(async () => {
    await deleteKeysWithPrefix(plain, prefix);
    redis.disconnect();
    plain.disconnect();
  });

  it('sends the 40 commands of one turn in one write, answered in order', async () => {
    const writes = countWrites(redis.stream);
    expect(await setAndGet(redis, 'one-turn', 20)).toEqual(expected(20));
    expect(writes).toEqual({ single: 0, batched: 1, chunks: 40 });
  });

  it("a plain ioredis client's same 40 commands take more than one write (what the count shows without it)", async () => {
    const writes = countWrites(plain.stream);
    expect(await setAndGet(plain, 'plain', 20)).toEqual(expected(20));
    expect(writes.single + writes.batched).toBeGreaterThan(1);
  });

  it('gathers the commands of separate callbacks of one turn', async () => {
    const writes = countWrites(redis.stream);
    const replies = await Promise.all(
      Array.from(
        { length: 5 },
        (_, i) =>
          new Promise<string | null>((resolve, reject) =>
            setImmediate(() => {
              const key = `${prefix}:callbacks:${i}`;
              void redis.set(key, `v${i}`);
              redis.get(key).then(resolve, reject);
            }),
          ),
      ),
    );
    expect(replies).toEqual(expected(5));
    expect(writes).toEqual({ single: 0, batched: 1, chunks: 10 });
  });

  it('writes a command before the turn after the one that issued it', async () => {
    const writes = countWrites(redis.stream);
    const reply = redis.ping('here');
    expect(writes.chunks).toBe(0);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes.chunks).toBe(1);
    expect(await reply).toBe('here');
  });

  it('coalesces the socket of a reconnect too', async () => {
    const first = redis.stream;
    const ready = new Promise((resolve) => redis.once('ready', resolve));
    redis.disconnect(true);
    await ready;
    expect(redis.stream).not.toBe(first);
    const writes = countWrites(redis.stream);
    expect(await setAndGet(redis, 'reconnected', 10)).toEqual(expected(10));
    expect(writes).toEqual({ single: 0, batched: 1, chunks: 20 });
  });
});
