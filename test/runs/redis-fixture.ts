import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/** DB 2 is the run store's test database; every file gets its own random prefix. */
export function testRedis(): { redis: Redis; prefix: string; cleanup: () => Promise<void> } {
  const redis = new Redis({ host: '127.0.0.1', port: 6379, db: 2, lazyConnect: false });
  const prefix = `test-runs-${randomBytes(4).toString('hex')}`;
  async function cleanup(): Promise<void> {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
    await redis.quit();
  }
  return { redis, prefix, cleanup };
}
