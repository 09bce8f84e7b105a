import { randomBytes } from 'node:crypto';
import type { RedisClient } from './redis-client.js';
import { generationKey } from '../keys/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';

export interface RedisGenerationWatch {
  /** The generation this process knows (`<random>@<ISO time it began>`). */
  readonly current: string;
  stop(): void;
}

/**
 * The generation Redis holds now (written first if there is none: a fresh or emptied Redis). A
 * command that follows a run reads it at start and asks {@link redisLostDataSince} when its run
 * is gone: a different generation means Redis lost its data, the same one that the run was
 * deleted (or evicted).
 */
export async function currentGeneration(redis: RedisClient, prefix: string): Promise<string> {
  const key = generationKey(prefix);
  const mine = `${randomBytes(6).toString('hex')}@${new Date().toISOString()}`;
  await redis.set(key, mine, 'NX');
  return (await redis.get(key)) ?? mine;
}

/** True when Redis no longer holds the generation `known` (it lost its data since); false when unsure. */
export async function redisLostDataSince(redis: RedisClient, prefix: string, known: string): Promise<boolean> {
  try {
    return (await redis.get(generationKey(prefix))) !== known;
  } catch {
    return false;
  }
}

/**
 * Notices that Redis lost its data (restarted without persistence, flushed, failed over to an
 * empty replica): a generation marker is written at first start and read again on every
 * reconnect. If it is gone, every queued job and run result written before is gone too; that
 * is said loudly, once per loss, instead of runs silently vanishing.
 */
export async function watchRedisGeneration(
  redis: RedisClient,
  prefix: string,
  logger: Logger,
): Promise<RedisGenerationWatch> {
  const key = generationKey(prefix);
  const mine = `${randomBytes(6).toString('hex')}@${new Date().toISOString()}`;
  await redis.set(key, mine, 'NX');
  const listener = (): void => void onReady();
  const watch = { current: (await redis.get(key)) ?? mine, stop: () => void redis.off('ready', listener) };
  async function onReady(): Promise<void> {
    try {
      const seen = await redis.get(key);
      if (seen === watch.current) return;
      const lost = watch.current;
      if (seen === null) await redis.set(key, `${randomBytes(6).toString('hex')}@${new Date().toISOString()}`, 'NX');
      watch.current = (await redis.get(key)) ?? watch.current;
      const since = lost.split('@')[1] ?? 'its start';
      logger.error(
        { lostGeneration: lost, generation: watch.current },
        `Redis lost its data (restarted without persistence?): queued rows and results of runs begun since ${since} are gone; ` +
          'send them again, files of creates only through a reconciled import (import <file> --op deal.create --upsert --match name), ' +
          'which leaves the deals they already made alone: a plain import would make them twice. ' +
          'Give Redis AOF persistence (appendonly yes) to survive restarts.',
      );
    } catch (err) {
      logger.warn({ err: errorMessage(err) }, 'could not check whether Redis kept its data after a reconnect');
    }
  }
  redis.on('ready', listener);
  return watch;
}
