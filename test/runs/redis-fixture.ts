import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';

/** DB 2 is the run store's test database; every file gets its own random prefix. */
export function testRedis(): { redis: Redis; prefix: string; cleanup: () => Promise<void> } {
  const redis = new Redis({ host: '127.0.0.1', port: 6379, db: 2, lazyConnect: false });
  const prefix = `test-runs-${randomBytes(4).toString('hex')}`;
  async function cleanup(): Promise<void> {
    await deleteKeysWithPrefix(redis, prefix);
    await redis.quit();
  }
  return { redis, prefix, cleanup };
}
