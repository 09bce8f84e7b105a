import type { RedisClient } from './redis-client.js';
import { isCluster } from './redis-client.js';
import { countOf } from '../counts/index.js';

/** The tag a run's reason carries when the workers ended or held it because Redis evicts keys. */
export const EVICTION_TAG = '[REDIS_EVICTS]';

export function isEvictionReason(reason: string | undefined): boolean {
  return reason?.includes(EVICTION_TAG) ?? false;
}

/** What Redis says about evicting keys: its policy, and how many keys it evicted since it started. */
export interface EvictionState {
  /** `maxmemory-policy` (the policy of the first node that says one, for a cluster). */
  policy: string;
  /** `evicted_keys` of INFO stats, summed over a cluster's masters. */
  evictedKeys: number;
}

/** True for a policy under which Redis drops keys to make room (anything but noeviction). */
export function evicts(state: EvictionState): boolean {
  return state.policy !== 'noeviction';
}

/**
 * Reads the eviction policy and the evicted-keys counter (INFO's default sections, memory and stats
 * among them), or undefined when INFO is not allowed (managed services that forbid it: nothing can
 * be read, nothing is claimed). One INFO per node, one moment: read as two (memory, then stats), a
 * policy switched to volatile-lru between them was told as "noeviction" beside the keys it had
 * evicted (a CI run's run reason).
 */
export async function readEviction(redis: RedisClient): Promise<EvictionState | undefined> {
  const nodes = isCluster(redis) ? redis.nodes('master') : [redis];
  let policy: string | undefined;
  let evictedKeys = 0;
  try {
    for (const node of nodes) {
      const info = await node.info();
      policy ??= /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
      evictedKeys += countOf(/^evicted_keys:(\d+)/m.exec(info)?.[1]);
    }
  } catch {
    return undefined;
  }
  return policy === undefined ? undefined : { policy, evictedKeys };
}
