import { Redis } from 'ioredis';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';

/** The test Redis (REDIS_URL); every file gets its own random prefix. */
export function testRedis(): { redis: Redis; prefix: string; cleanup: () => Promise<void> } {
  const redis = new Redis(TEST_REDIS_URL, { lazyConnect: false });
  const prefix = testPrefix('runs');
  async function cleanup(): Promise<void> {
    await deleteKeysWithPrefix(redis, prefix);
    await redis.quit();
  }
  return { redis, prefix, cleanup };
}
