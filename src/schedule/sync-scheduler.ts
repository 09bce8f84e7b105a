import { Worker, type Job } from 'bullmq';
import type { Config } from '../config/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { bullPrefix } from '../queue/index.js';
import { openRuntime, type Runtime } from '../runtime/index.js';
import { findDefinition, loadDefinitionFile, type SyncDefinition } from './sync-definition.js';
import { SYNC_QUEUE, type SyncTickData } from './sync-queue.js';
import { runSync, type RunSyncOptions, type SyncSummary } from './run-sync.js';

export interface SyncSchedulerOptions {
  config: Config;
  logger: Logger;
  /** Directory of the definitions, used when a tick's file has moved. Default `jobs`. */
  jobsDir?: string;
  /** Ticks handled at once (different syncs run side by side; one sync never overlaps itself). Default 4. */
  concurrency?: number;
  /** Shared runtime; its Redis must be a `worker` connection. Default: one of its own, closed by `close`. */
  runtime?: Runtime;
  /** Passed to runSync. Default: its defaults. */
  runSync?: Omit<RunSyncOptions, 'runtime' | 'client'>;
}

export interface SyncScheduler {
  worker: Worker<SyncTickData, SyncSummary, string>;
  close(): Promise<void>;
}

/**
 * Turns each tick of the installed job schedulers into a reconciled run. The definition is
 * read again at every tick, so an edited file applies from the next tick on.
 */
export async function startSyncScheduler(options: SyncSchedulerOptions): Promise<SyncScheduler> {
  const { config, logger } = options;
  const runtime = options.runtime ?? (await openRuntime(config, logger, 'worker'));
  const jobsDir = options.jobsDir ?? 'jobs';
  const load = (data: SyncTickData): SyncDefinition => {
    try {
      return loadDefinitionFile(data.file);
    } catch (err) {
      logger.warn({ sync: data.sync, file: data.file, err: errorMessage(err) }, 'definition file unreadable; looking it up by name');
      return findDefinition(jobsDir, data.sync);
    }
  };
  const worker = new Worker<SyncTickData, SyncSummary, string>(
    SYNC_QUEUE,
    async (job: Job<SyncTickData, SyncSummary, string>) => runSync(load(job.data), { runtime, ...options.runSync }),
    { connection: runtime.redis, prefix: bullPrefix(config.prefix), concurrency: options.concurrency ?? 4, autorun: true },
  );
  worker.on('failed', (job, err) => logger.error({ sync: job?.data.sync, err: err.message }, 'sync tick failed'));
  worker.on('error', (err) => logger.warn({ err: errorMessage(err) }, 'scheduler connection error (retrying)'));
  await worker.waitUntilReady();
  logger.info({ queue: SYNC_QUEUE, jobsDir }, 'sync scheduler started');
  return {
    worker,
    async close() {
      await worker.close();
      if (!options.runtime) await runtime.close();
    },
  };
}
