import { setTimeout as sleep } from 'node:timers/promises';
import { Worker, type Job } from 'bullmq';
import { DEFAULTS, resolveSettings, type Config } from '../config/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { bullPrefix, schedulerProbeKey } from '../keys/index.js';
import { RedisFullGuard } from '../redis/index.js';
import { openRuntime, type Runtime } from '../runtime/index.js';
import { findDefinition, loadDefinitionFile, type SyncDefinition } from './sync-definition.js';
import { SYNC_QUEUE, type SyncTickData } from './sync-queue.js';
import { runSync, type RunSyncOptions, type SyncSummary } from './run-sync.js';

export interface SyncSchedulerOptions {
  config: Config;
  logger: Logger;
  /** Directory of the definitions, used when a tick's file has moved. Default DEFAULTS.scheduler (`jobs`). */
  jobsDir?: string;
  /** Ticks handled at once (different syncs run side by side; one sync never overlaps itself). Default DEFAULTS.scheduler (4). */
  concurrency?: number;
  /** Shared runtime; its Redis must be a `worker` connection. Default: one of its own, closed by `close`. */
  runtime?: Runtime;
  /** Passed to runSync. Default: its defaults. */
  runSync?: Omit<RunSyncOptions, 'runtime' | 'client'>;
  /**
   * How long `close` waits for the syncs in hand before it stops waiting. Default DEFAULTS.scheduler (30 000 ms).
   * A sync can take hours; its run goes on in the workspace queue without this process (the
   * sync lock expires, and later ticks skip while the run is still going).
   */
  closeTimeoutMs?: number;
}

export interface SyncScheduler {
  worker: Worker<SyncTickData, SyncSummary, string>;
  close(): Promise<void>;
}

/**
 * Turns each tick of the installed job schedulers into a reconciled run. The definition is
 * read again at every tick, so an edited file applies from the next tick on.
 */
export async function startSyncScheduler(given: SyncSchedulerOptions): Promise<SyncScheduler> {
  const options = resolveSettings(given, {
    jobsDir: DEFAULTS.scheduler.jobsDir,
    concurrency: DEFAULTS.scheduler.concurrency,
    closeTimeoutMs: DEFAULTS.scheduler.closeTimeoutMs,
  });
  const { config, logger, jobsDir } = options;
  const runtime = options.runtime ?? (await openRuntime(config, logger, 'worker'));
  const load = (data: SyncTickData): SyncDefinition => {
    try {
      return loadDefinitionFile(data.file);
    } catch (err) {
      logger.warn(
        { sync: data.sync, file: data.file, err: errorMessage(err) },
        'definition file unreadable; looking it up by name',
      );
      return findDefinition(jobsDir, data.sync);
    }
  };
  const inHand = new Set<Promise<SyncSummary>>();
  const handle = (job: Job<SyncTickData, SyncSummary, string>): Promise<SyncSummary> => {
    const sync = runSync(load(job.data), { runtime, ...options.runSync });
    inHand.add(sync);
    void sync.finally(() => inHand.delete(sync)).catch(() => undefined);
    return sync;
  };
  const worker = new Worker<SyncTickData, SyncSummary, string>(
    SYNC_QUEUE,
    async (job: Job<SyncTickData, SyncSummary, string>) => handle(job),
    {
      connection: runtime.redis,
      prefix: bullPrefix(config.prefix),
      concurrency: options.concurrency,
      autorun: true,
    },
  );
  worker.on('failed', (job, err) => logger.error({ sync: job?.data.sync, err: err.message }, 'sync tick failed'));
  // Started into a full Redis, or filled later, BullMQ's tick fetch fails in a tight loop: one line, then a probe.
  const full = new RedisFullGuard({
    worker,
    redis: runtime.redis,
    probeKey: schedulerProbeKey(config.prefix),
    logger,
    probeMs: DEFAULTS.worker.redisFullProbeMs,
    stops: 'the scheduler stops taking sync ticks',
    resumes: 'taking sync ticks',
  });
  worker.on('error', (err) => {
    if (!full.onError(err)) logger.warn({ err: errorMessage(err) }, 'scheduler connection error (retrying)');
  });
  await worker.waitUntilReady();
  logger.info({ queue: SYNC_QUEUE, jobsDir }, 'sync scheduler started');
  return {
    worker,
    async close() {
      const timeoutMs = options.closeTimeoutMs;
      // Take no new tick, then give the ones in hand a while. worker.close() alone would wait
      // for them however long they take, and a later close(true) only joins that wait.
      await worker.pause(true);
      const timer = new AbortController();
      const drained = await Promise.race([
        Promise.allSettled([...inHand]).then(() => true),
        sleep(timeoutMs, false, { signal: timer.signal }).catch(() => false),
      ]);
      timer.abort();
      if (!drained)
        logger.warn(
          { timeoutMs, syncs: inHand.size },
          'syncs still in hand at the close timeout: their runs go on in the workspace queues',
        );
      await worker.close(!drained);
      if (!options.runtime) await runtime.close();
    },
  };
}
