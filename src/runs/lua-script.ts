import { createHash } from 'node:crypto';
import type { RedisClient } from '../redis/index.js';

/**
 * A Lua script run by EVALSHA, falling back to EVAL once when the server does not know it
 * (first use, or after a Redis restart / SCRIPT FLUSH). We do not use `defineCommand`
 * because the Redis client belongs to the caller and should not grow commands behind
 * its back.
 */
export class LuaScript {
  readonly sha: string;

  constructor(readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(
    redis: RedisClient,
    keys: readonly string[],
    args: ReadonlyArray<string | number | Buffer>,
  ): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('NOSCRIPT')) {
        return redis.eval(this.source, keys.length, ...keys, ...args);
      }
      throw error;
    }
  }
}
