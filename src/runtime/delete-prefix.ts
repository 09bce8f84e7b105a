import { scanKeys, unlinkKeys, type RedisClient } from '../redis/index.js';

/**
 * Removes every key under `<prefix>:` with SCAN + UNLINK, never KEYS (which blocks Redis), on
 * every master of a Cluster. Tests, benchmarks and one-off tools use it to leave nothing behind.
 */
export async function deleteKeysWithPrefix(redis: RedisClient, prefix: string): Promise<number> {
  let removed = 0;
  await scanKeys(redis, `${prefix}:*`, async (keys) => {
    removed += await unlinkKeys(redis, keys);
  });
  return removed;
}
