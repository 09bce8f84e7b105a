import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authFailuresNamespace } from '../keys/index.js';
import type { Logger } from '../log/index.js';
import type { Config } from '../config/index.js';
import { connectConfiguredRedis } from '../queue/index.js';

export interface AuthThrottleOptions {
  /** Failed sign-ins and bearer checks a client may make per window. Default 10. */
  maxFailures?: number;
  /** The window, from a client's first failure. Default 15 minutes. */
  windowMs?: number;
}

export interface AuthThrottle {
  /** Seconds the client must wait before it may try a token again, or null when it may now. */
  waitSeconds(request: FastifyRequest): Promise<number | null>;
  /** Counts one wrong token from this client (logs once when a client reaches the limit). */
  failed(request: FastifyRequest): Promise<void>;
}

/**
 * Per-client limit on wrong tokens, shared by every dashboard process through Redis:
 * @fastify/rate-limit's Redis store, counting only failures (`increment: false` peeks without
 * counting). A client at the limit is refused before its token is even compared, so a right
 * guess during the lock-out does not tell it anything. The client is `request.ip`, which is the
 * proxy's client only with a matching `trustProxy`.
 *
 * The plugin adds Lua commands to the Redis client it is given, so it gets its own connection
 * (closed with the app) rather than the runtime's shared one.
 */
export async function registerAuthThrottle(
  app: FastifyInstance,
  options: AuthThrottleOptions & { redis: Pick<Config, 'redisUrl' | 'redisCluster'>; prefix: string; logger: Logger },
): Promise<AuthThrottle> {
  const max = options.maxFailures ?? 10;
  const windowMs = options.windowMs ?? 15 * 60_000;
  const redis = await connectConfiguredRedis(options.redis, { role: 'client', name: 'crm-sync-dashboard-limits' });
  app.addHook('onClose', async () => {
    redis.disconnect();
  });
  await app.register(rateLimit, {
    global: false,
    max,
    timeWindow: windowMs,
    redis,
    nameSpace: authFailuresNamespace(options.prefix),
    skipOnError: false,
  });
  const limiter = app.createRateLimit();
  return {
    async waitSeconds(request) {
      const state = await limiter(request, { increment: false });
      if (state.isAllowed || state.remaining > 0) return null;
      return Math.max(1, state.ttlInSeconds);
    },
    async failed(request) {
      const state = await limiter(request);
      // Exactly one failure sees the count reach the limit: one log line per burst.
      if (!state.isAllowed && state.remaining === 0 && !state.isExceeded) {
        options.logger.warn(
          {
            client: state.key,
            failures: max,
            windowSeconds: Math.round(windowMs / 1000),
            lockedSeconds: state.ttlInSeconds,
          },
          `dashboard: ${max} wrong tokens from ${state.key}; refusing its sign-ins and bearer requests for ${state.ttlInSeconds} s`,
        );
      }
    },
  };
}
