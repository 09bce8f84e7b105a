import type { Cluster, Redis } from 'ioredis';

/**
 * What every part of crm-sync talks to: one Redis, or a Redis Cluster (ioredis `Cluster`, which
 * routes each command to the master of its key's slot). Both speak the same commands; the
 * differences the code must respect are in docs/architecture.md, "Redis Cluster": a script, MULTI
 * or pipeline names keys of one slot only, and SCAN walks one node (see {@link scanKeys}).
 */
export type RedisClient = Redis | Cluster;

export function isCluster(redis: RedisClient): redis is Cluster {
  return (redis as Cluster).isCluster === true;
}

/** The nodes whose keys a SCAN must walk: every master of a Cluster, or the one Redis. */
function scanTargets(redis: RedisClient): Redis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

/**
 * Calls `onKeys` with every key matching `pattern`, SCAN by SCAN (never KEYS, which blocks
 * Redis), on every master of a Cluster.
 */
export async function scanKeys(
  redis: RedisClient,
  pattern: string,
  onKeys: (keys: string[]) => Promise<void>,
): Promise<void> {
  for (const node of scanTargets(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await onKeys(keys);
    } while (cursor !== '0');
  }
}

/**
 * UNLINKs keys that may sit in different slots: one command a key on a Cluster (a multi-key
 * UNLINK must name one slot), one command in all on a single Redis. Answers how many existed.
 */
export async function unlinkKeys(redis: RedisClient, keys: readonly string[]): Promise<number> {
  if (keys.length === 0) return 0;
  if (!isCluster(redis)) return redis.unlink(...keys);
  const counts = await Promise.all(keys.map((key) => redis.unlink(key)));
  return counts.reduce((a, b) => a + b, 0);
}
