import type { Redis } from 'ioredis';
import type { Config } from '../config/index.js';
// The files themselves, not the queue and runs barrels: opening the store must not load BullMQ.
import { connectRedis, refuseEvictingRedis, refuseRedisCluster, type RedisRole } from '../queue/redis-connection.js';
import { RunStore } from '../runs/run-store.js';

/** A checked Redis connection and the run store on it: all that reading runs needs (no queues). */
export interface OpenStore {
  redis: Redis;
  store: RunStore;
}

/** Connects to the config's Redis, refuses a cluster or an evicting one, and opens the run store. */
export async function openStore(config: Config, role: RedisRole = 'client'): Promise<OpenStore> {
  const redis = await connectRedis(config.redisUrl, { role, name: `crm-sync-${role}` });
  try {
    await refuseRedisCluster(redis);
    await refuseEvictingRedis(redis);
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  return { redis, store: new RunStore({ redis, prefix: config.prefix }) };
}
