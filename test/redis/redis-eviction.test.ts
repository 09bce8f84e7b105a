import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { readEviction } from '../../src/redis/index.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

const redis = new Redis(TEST_REDIS_URL);
afterAll(async () => {
  await redis.quit();
});

describe('readEviction', () => {
  it('reads the policy and the evicted keys at one moment: one INFO, so a policy switched between two reads is not told beside keys it evicted', async () => {
    const sections: unknown[][] = [];
    const watched = new Proxy(redis, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver) as unknown;
        if (name !== 'info' || typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          sections.push(args);
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const state = await readEviction(watched);
    const policy = /^maxmemory_policy:(\S+)/m.exec(await redis.info('memory'))?.[1];
    expect(state?.policy).toBe(policy);
    expect(state?.evictedKeys).toBeGreaterThanOrEqual(0);
    // (Read as INFO memory, then INFO stats, a CI run's run reason said "maxmemory-policy
    // noeviction" for keys a volatile-lru Redis had just evicted.)
    expect(sections).toEqual([[]]);
  });
});
