import { DEFAULTS } from '../config/index.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';

/** How long a producer waits for Redis to come back before it gives up. */
export const DEFAULT_PRODUCER_OUTAGE_MS = DEFAULTS.producer.redisOutageMs;

/**
 * ioredis's ways of saying Redis is not there (restarting, partitioned, refusing). "Command
 * aborted due to connection close": a pipeline (BullMQ's addBulk) whose connection closed after
 * part of its replies came; a CI run's producer behind a half-open link failed its import on it
 * (test/faults/partition-half-open.test.ts) instead of waiting, as for any other closed connection.
 */
const UNAVAILABLE =
  /Connection is closed|Command aborted due to connection close|Stream isn't writeable|Command timed out|max retries per request|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|LOADING/i;

/** Redis's answer to a write when it is at maxmemory with noeviction. */
export function isRedisFull(err: unknown): boolean {
  return /\bOOM command not allowed\b/.test(errorMessage(err));
}

export function isRedisUnavailable(err: unknown): boolean {
  return !(err instanceof CrmSyncError) && UNAVAILABLE.test(errorMessage(err));
}

export interface RideOutOptions {
  logger: Logger;
  /** Give up after Redis has not answered this long. Default DEFAULT_PRODUCER_OUTAGE_MS. */
  outageMs?: number;
  /** The error to end with, given how long Redis was away. */
  giveUp: (waitedMs: number, last: unknown) => Error;
  /**
   * Given, a write Redis refuses because it is full (maxmemory, noeviction) is waited out like an
   * outage (the workers free room as they finish rows, or an operator raises maxmemory), said in
   * one line, up to `outageMs`; then this is the error to end with. Not given: the refusal is thrown at once.
   */
  full?: (waitedMs: number, err: unknown) => Error;
}

/**
 * Runs a producer step, and while Redis is unavailable (a restart, a partition), waits with
 * backoff and runs it again, up to `outageMs`. Only for steps that are safe to repeat: job ids
 * dedupe in BullMQ, counts are idempotent (`addQueued` with its row), results overwrite.
 */
export async function rideOutRedis<T>(step: () => Promise<T>, options: RideOutOptions): Promise<T> {
  const outageMs = options.outageMs ?? DEFAULT_PRODUCER_OUTAGE_MS;
  let since: number | undefined;
  for (let attempt = 0; ; attempt++) {
    try {
      const value = await step();
      if (since !== undefined)
        options.logger.info(
          { seconds: Math.round((Date.now() - since) / 1000) },
          'Redis answers (and has room) again: producing goes on',
        );
      return value;
    } catch (err) {
      const full = isRedisFull(err) ? options.full : undefined;
      if (!full && !isRedisUnavailable(err)) throw err;
      const now = Date.now();
      if (since === undefined) {
        since = now;
        options.logger.warn(
          { err: errorMessage(err), waitUpToSeconds: Math.round(outageMs / 1000) },
          full
            ? 'Redis is full (maxmemory reached): the producer waits for room before it queues more rows, and goes on by itself once it has some; nothing read so far is lost. Free memory or raise maxmemory'
            : 'Redis does not answer: the producer waits for it; nothing read so far is lost',
        );
      }
      if (now - since >= outageMs) throw full ? full(now - since, err) : options.giveUp(now - since, err);
      await sleep(Math.min(200 * 2 ** Math.min(attempt, 4), 3000));
    }
  }
}
