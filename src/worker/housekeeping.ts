import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../redis/index.js';
import { housekeepingLockKey } from '../keys/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { pruneRuns, type PruneOptions, type RunStore } from '../runs/index.js';

export interface HousekeepingOptions {
  redis: RedisClient;
  store: RunStore;
  prefix: string;
  resultsDir: string;
  /** Ended runs older than this are archived and removed (the config's retention). */
  retentionMs: number;
  logger: Logger;
  /** How often a worker process tries; one process of the fleet does it per period (ms). */
  everyMs: number;
  /** Each run about to be removed (the history's last catch-up). */
  beforeDelete?: PruneOptions['beforeDelete'];
}

/**
 * Retention without an operator: every period one worker process of the fleet (whichever takes
 * the Redis lock first) archives and removes expired runs (pruneRuns). Returns the stop function.
 */
export function startHousekeeping(options: HousekeepingOptions): () => void {
  const everyMs = options.everyMs;
  const lockKey = housekeepingLockKey(options.prefix);
  const token = randomBytes(8).toString('hex');
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      // Held for the period, so the fleet prunes once per period whoever is up.
      if ((await options.redis.set(lockKey, token, 'PX', everyMs, 'NX')) !== 'OK') return;
      const s = await pruneRuns({
        store: options.store,
        resultsDir: options.resultsDir,
        olderThanMs: options.retentionMs,
        ...(options.beforeDelete ? { beforeDelete: options.beforeDelete } : {}),
      });
      if (s.runs.length + s.files.length > 0) {
        options.logger.info(
          { runs: s.runs.length, archivedRows: s.archivedRows, files: s.files.length, kept: s.kept.length },
          'retention: expired runs archived and removed from Redis',
        );
      }
    } catch (err) {
      options.logger.warn({ err: errorMessage(err) }, 'retention housekeeping failed; it is tried again next period');
    } finally {
      busy = false;
    }
  };
  const first = setTimeout(() => void tick(), Math.min(everyMs, 30_000));
  const timer = setInterval(() => void tick(), everyMs);
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}
