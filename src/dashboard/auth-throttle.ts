import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authFailuresNamespace } from '../keys/index.js';
import type { Logger } from '../log/index.js';
import type { Config } from '../config/index.js';
import { connectConfiguredRedis } from '../redis/index.js';
import { asNumber, codedListReply, defineScript, flagReply, valueReply } from '../redis/index.js';

export interface AuthThrottleOptions {
  /** Wrong tokens a client may send per window (and checks it may have at once). Default DEFAULTS.dashboard.authMaxFailures. */
  maxFailures?: number;
  /** The window, from a client's first attempt in it (ms). Default DEFAULTS.dashboard.authWindowMs. */
  windowMs?: number;
}

/** The answer to "may this client have its token checked now?". */
export type TokenAttempt =
  | { allowed: false; waitSeconds: number }
  | {
      allowed: true;
      /** Gives the attempt's place back: the token was right, so it was no guess. */
      succeeded(): Promise<void>;
      /** Counts a wrong token (logs once, when the client's count reaches the limit). */
      failed(): Promise<void>;
    };

export interface AuthThrottle {
  /**
   * Takes one of this client's places before its token is looked at, or says how long to wait.
   * Every caller that gets `allowed` must call `succeeded` or `failed`, whatever happens.
   */
  attempt(request: FastifyRequest): Promise<TokenAttempt>;
}

// The client's record is a hash: `f` wrong tokens in the window, `i` checks in flight. A check
// may start only while f + i < max, so however many requests arrive at once, at most `max`
// tokens are ever compared before the f of a window reaches max (acquire-auth-attempt-1.lua).

const optionalNumber = (raw: unknown): number | undefined => (raw === undefined ? undefined : Number(raw));

/** Returns {verdict, failures, ttlMs}: verdict 0 locked, 1 busy (all places in flight), 2 go. */
const ACQUIRE = defineScript({
  file: 'acquire-auth-attempt-1',
  keys: ['clientKey'],
  args: ['max', 'windowMs'],
  reply: codedListReply([0, 1, 2], (verdict, [, failures, ttlMs]) => ({
    verdict,
    failures: asNumber(failures),
    ttlMs: optionalNumber(ttlMs),
  })),
});
/** A wrong token: its place stays taken for the window. Returns {failures, ttlMs}. */
const FAILED = defineScript({
  file: 'fail-auth-attempt-1',
  keys: ['clientKey'],
  args: ['windowMs'],
  reply: valueReply((raw) => {
    const [failures, ttlMs] = (Array.isArray(raw) ? raw : []) as unknown[];
    return { failures: asNumber(failures), ttlMs: optionalNumber(ttlMs) };
  }),
});
/** A right token gives its place back (never into a window that has ended); false when there was no record. */
const SUCCEEDED = defineScript({ file: 'pass-auth-attempt-1', keys: ['clientKey'], args: [], reply: flagReply });

/** How often a request whose client has every place in flight looks again, and for how long. */
const BUSY_POLL_MS = 20;
const BUSY_WAIT_MS = 5_000;

/**
 * Per-client limit on token guesses, shared by every dashboard process through Redis.
 *
 * Count first, then check: a request takes one of the client's `max` places in one atomic
 * script before its token is compared, and gives it back only when the token was right. A
 * check that finds no free place is not made: with every place held by a wrong token the client
 * is locked out for the rest of the window (429); with places held by checks still in flight it
 * waits for one to come back (a script's burst of right-token requests goes through, a burst of
 * guesses finds the places taken by wrong tokens). Two requests can never both read "9 so far"
 * and both be checked, so 200 guesses sent at once get at most `max` comparisons. A client at
 * the limit is refused before its token is compared, so a right guess during the lock-out tells
 * it nothing. The client is `request.ip`, which is the proxy's client only with a matching
 * `trustProxy`.
 *
 * It has its own Redis connection (closed with the app): a flood of guesses queues on it, not on
 * the connection the pages use.
 */
export async function registerAuthThrottle(
  app: FastifyInstance,
  options: Required<AuthThrottleOptions> & {
    redis: Pick<Config, 'redisUrl' | 'redisCluster'>;
    prefix: string;
    logger: Logger;
  },
): Promise<AuthThrottle> {
  const { maxFailures: max, windowMs } = options;
  const namespace = authFailuresNamespace(options.prefix);
  const redis = await connectConfiguredRedis(options.redis, { role: 'client', name: 'crm-sync-dashboard-limits' });
  app.addHook('onClose', async () => {
    redis.disconnect();
  });
  const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

  return {
    async attempt(request) {
      const client = request.ip;
      const key = `${namespace}${client}`;
      const deadline = Date.now() + BUSY_WAIT_MS;
      for (;;) {
        const { verdict, ttlMs } = await ACQUIRE.run(
          redis,
          { clientKey: key },
          { max: String(max), windowMs: String(windowMs) },
        );
        if (verdict === 0) return { allowed: false, waitSeconds: seconds(ttlMs ?? windowMs) };
        if (verdict === 2) break;
        // Every place is taken by a check still running: one comes back in milliseconds.
        if (Date.now() >= deadline) return { allowed: false, waitSeconds: 1 };
        await sleep(BUSY_POLL_MS);
      }
      return {
        allowed: true,
        async succeeded() {
          await SUCCEEDED.run(redis, { clientKey: key }, {});
        },
        async failed() {
          const { failures, ttlMs } = await FAILED.run(redis, { clientKey: key }, { windowMs: String(windowMs) });
          // The count goes up one at a time in Redis: exactly one failure sees it reach the limit.
          if (failures !== max) return;
          const lockedSeconds = seconds(ttlMs ?? windowMs);
          options.logger.warn(
            { client, failures: max, windowSeconds: Math.round(windowMs / 1000), lockedSeconds },
            `dashboard: ${max} wrong tokens from ${client}; refusing its sign-ins and bearer requests for ${lockedSeconds} s`,
          );
        },
      };
    },
  };
}
