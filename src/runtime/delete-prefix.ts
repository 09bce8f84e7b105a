import type { Redis } from 'ioredis';

/**
 * Removes every key under `<prefix>:` with SCAN + UNLINK, never KEYS (which blocks Redis).
 * Tests, benchmarks and one-off tools use it to leave nothing behind.
 */
export async function deleteKeysWithPrefix(redis: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let removed = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) removed += await redis.unlink(...keys);
  } while (cursor !== '0');
  return removed;
}
