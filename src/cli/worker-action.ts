// What `crm-sync worker` does, loaded by worker-command.ts only when the command runs (its options
// and help are declared there).
import type { Command } from 'commander';
import { derivedSettings } from '../config/index.js';
import { startSyncScheduler, type SyncScheduler } from '../schedule/index.js';
import { startWorkerPool, type WorkerPool } from '../worker/index.js';
import { cliConfig, cliContext, type CliContext } from './context.js';
import { serveUntilSignal } from './shutdown.js';

/** As commander gives them: options with a default (worker-command.ts, from DEFAULTS) are always set. */
export interface WorkerOptions {
  workspace?: string[];
  concurrency: number;
  lockMs: number;
  closeTimeoutMs: number;
  withScheduler?: boolean;
  jobsDir: string;
}

/** `worker`: starts the pool (BullMQ, the CRM client) and runs until a signal. */
export async function runWorker(opts: WorkerOptions, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  const { started } = await serveUntilSignal({
    start: (signal) => start(opts, { config, logger, command, signal }),
    stop: async ({ pool, scheduler }) => {
      await scheduler?.close();
      await pool.close();
    },
    // Scheduler and pool close one after the other, each within (as counted here) the close timeout.
    forceAfterMs: derivedSettings({
      closeTimeoutsMs: opts.withScheduler ? [opts.closeTimeoutMs, opts.closeTimeoutMs] : [opts.closeTimeoutMs],
    }).forceExitAfterMs,
  });
  logger.info(started ? 'worker stopped' : 'worker stopped before it started');
}

interface Started {
  pool: WorkerPool;
  scheduler: SyncScheduler | null;
}

async function start(
  opts: WorkerOptions,
  { config, logger, command, signal }: CliContext & { command: Command; signal: AbortSignal },
): Promise<Started> {
  const pool = await startWorkerPool({
    config,
    logger,
    reloadConfig: () => cliConfig(command),
    ...(opts.workspace ? { workspaces: opts.workspace } : {}),
    concurrency: opts.concurrency,
    lockDurationMs: opts.lockMs,
    closeTimeoutMs: opts.closeTimeoutMs,
    signal,
  });
  const scheduler =
    opts.withScheduler && !signal.aborted
      ? await startSyncScheduler({ config, logger, runtime: pool.runtime, jobsDir: opts.jobsDir }).catch(
          async (err: unknown) => {
            await pool.close();
            throw err;
          },
        )
      : null;
  return { pool, scheduler };
}
