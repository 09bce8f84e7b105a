import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { TEST_REDIS_URL } from './redis.js';

/**
 * A test file's Redis connection and request-budget keys of its own: each key made with the
 * learned rate and send log beside it (`:rate`, `:log`), all deleted when the file ends.
 */
export function bucketKeys(name: string): { redis: Redis; bucketKey(): string } {
  const redis = new Redis(TEST_REDIS_URL);
  const keys: string[] = [];
  afterAll(async () => {
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
  });
  const bucketKey = () => {
    const key = `crm-sync-test-${name}-${randomBytes(4).toString('hex')}`;
    keys.push(key, `${key}:rate`, `${key}:log`);
    return key;
  };
  return { redis, bucketKey };
}
