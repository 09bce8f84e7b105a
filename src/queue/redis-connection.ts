import { Redis, type RedisOptions } from 'ioredis';
import { CrmSyncError } from '../errors/index.js';

/**
 * `worker`: BullMQ workers and anything inside a worker process (the run store there) must ride
 * out a Redis restart, so commands wait for the reconnect (maxRetriesPerRequest: null).
 * `client`: producers and CLI commands fail fast instead of hanging when Redis is gone.
 */
export type RedisRole = 'worker' | 'client';

export interface ConnectRedisOptions {
  role: RedisRole;
  /** Client name shown by `CLIENT LIST`. Default `crm-sync`. */
  name?: string;
  /** How long to wait for the first connection. Default 5000 ms. */
  connectTimeoutMs?: number;
}

/** The URL with any password replaced, for messages. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

export function redisOptions(role: RedisRole, name = 'crm-sync'): RedisOptions {
  return {
    connectionName: name,
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    enableOfflineQueue: role === 'worker',
    // Reconnect forever with a capped delay: a worker outlives a Redis restart.
    retryStrategy: (times) => Math.min(200 * 2 ** Math.min(times, 6), 5000),
    lazyConnect: true,
  };
}

/** Connects and waits until Redis answers, or throws REDIS_UNAVAILABLE saying how to fix it. */
export async function connectRedis(url: string, options: ConnectRedisOptions): Promise<Redis> {
  const redis = new Redis(url, redisOptions(options.role, options.name));
  let lastError: Error | undefined;
  const onError = (err: Error) => {
    lastError = err;
  };
  redis.on('error', onError);
  const timeoutMs = options.connectTimeoutMs ?? 5000;
  try {
    await Promise.race([
      redis.connect(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), timeoutMs).unref()),
    ]);
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    const reason = lastError?.message ?? (err as Error).message;
    throw new CrmSyncError(
      'REDIS_UNAVAILABLE',
      `Redis at ${redactRedisUrl(url)} is not reachable (${reason}). Start one (redis-server) or set REDIS_URL.`,
      { cause: err },
    );
  }
  // Keep a listener so ioredis does not print unhandled errors while it reconnects.
  redis.off('error', onError);
  redis.on('error', () => undefined);
  return redis;
}
