import type { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { LuaScript } from '../runs/index.js';

/**
 * Takes one token from BullMQ's own limiter window (the key `moveToActive` increments for
 * every job it starts), or answers how long until the window ends.
 */
const TAKE = new LuaScript(`
local max = tonumber(ARGV[1])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used >= max then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return ttl end
  redis.call('DEL', KEYS[1])
end
if redis.call('INCR', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`);

export interface SharedLimiterOptions {
  redis: Redis;
  /** BullMQ's limiter key of the workspace queue (`<bull prefix>:<queue>:limiter`). */
  key: string;
  /** The limit as the queue's limiter holds it (after smoothing). */
  max: number;
  durationMs: number;
}

/**
 * Requests that are not jobs (the list pages a create's lookup reads) spend the same budget
 * as jobs: one shared limit for every worker process of the workspace, so a lookup storm can
 * never push the workspace over the CRM's limit (docs/architecture.md, "Rate limits").
 */
export class SharedLimiter {
  constructor(private readonly o: SharedLimiterOptions) {}

  /** Resolves once a token is taken; waits out full windows (and 429 pauses, which fill it). */
  async take(signal?: AbortSignal): Promise<void> {
    for (;;) {
      const wait = Number(await TAKE.run(this.o.redis, [this.o.key], [this.o.max, this.o.durationMs]));
      if (wait <= 0) return;
      await sleep(wait, undefined, signal ? { signal } : undefined);
    }
  }
}
