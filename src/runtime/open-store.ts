import type { RedisClient } from '../redis/index.js';
import type { Config } from '../config/index.js';
// Light surfaces, not the queue and runs barrels: opening the store must not load BullMQ or pg.
import { connectConfiguredRedis } from '../redis/index.js';
import { refuseEvictingRedis, refuseRedisCluster, type RedisRole } from '../redis/index.js';
import type { Logger } from '../log/index.js';
import { migrateLayout } from './migrate-layout.js';
import { RunStore } from '../runs/light.js';

/** A checked Redis connection and the run store on it: all that reading runs needs (no queues). */
export interface OpenStore {
  redis: RedisClient;
  store: RunStore;
}

/**
 * Connects to the config's Redis (or Redis Cluster), refuses a cluster node reached through
 * REDIS_URL or an evicting Redis, brings the prefix's keys to this version's layout, and opens the
 * run store.
 */
export async function openStore(config: Config, role: RedisRole = 'client', logger?: Logger): Promise<OpenStore> {
  const redis = await connectConfiguredRedis(config, { role, name: `crm-sync-${role}`, ...(logger ? { logger } : {}) });
  try {
    await refuseRedisCluster(redis);
    await refuseEvictingRedis(redis);
    await migrateLayout(redis, config.prefix, logger ? { logger } : {});
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  return { redis, store: new RunStore({ redis, prefix: config.prefix }) };
}
