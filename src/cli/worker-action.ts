// What `crm-sync worker` does, loaded by worker-command.ts only when the command runs (its options
// and help are declared there).
import type { Command } from 'commander';
import { derivedSettings } from '../config/index.js';
import { startSyncScheduler } from '../schedule/index.js';
import { startWorkerPool } from '../worker/index.js';
import { cliConfig, cliContext } from './context.js';
import { onShutdown } from './shutdown.js';

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
  const pool = await startWorkerPool({
    config,
    logger,
    reloadConfig: () => cliConfig(command),
    ...(opts.workspace ? { workspaces: opts.workspace } : {}),
    concurrency: opts.concurrency,
    lockDurationMs: opts.lockMs,
    closeTimeoutMs: opts.closeTimeoutMs,
  });
  const scheduler = opts.withScheduler
    ? await startSyncScheduler({ config, logger, runtime: pool.runtime, jobsDir: opts.jobsDir })
    : null;
  await new Promise<void>((resolve) => {
    onShutdown(
      async () => {
        await scheduler?.close();
        await pool.close();
        logger.info('worker stopped');
        resolve();
      },
      // Scheduler and pool close one after the other, each within (as counted here) the close timeout.
      {
        forceAfterMs: derivedSettings({
          closeTimeoutsMs: scheduler ? [opts.closeTimeoutMs, opts.closeTimeoutMs] : [opts.closeTimeoutMs],
        }).forceExitAfterMs,
      },
    );
  });
}
