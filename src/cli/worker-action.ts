// What `crm-sync worker` does, loaded by worker-command.ts only when the command runs (its options
// and help are declared there).
import type { Command } from 'commander';
import { startSyncScheduler } from '../schedule/index.js';
import { startWorkerPool } from '../worker/index.js';
import { cliConfig, cliContext } from './context.js';
import { onShutdown, SHUTDOWN_GRACE_MS } from './shutdown.js';

export interface WorkerOptions {
  workspace?: string[];
  concurrency?: number;
  lockMs?: number;
  closeTimeoutMs?: number;
  withScheduler?: boolean;
  jobsDir?: string;
}

/** `worker`: starts the pool (BullMQ, the CRM client) and runs until a signal. */
export async function runWorker(opts: WorkerOptions, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  const pool = await startWorkerPool({
    config,
    logger,
    reloadConfig: () => cliConfig(command),
    ...(opts.workspace ? { workspaces: opts.workspace } : {}),
    concurrency: opts.concurrency ?? 8,
    lockDurationMs: opts.lockMs ?? 30_000,
    closeTimeoutMs: opts.closeTimeoutMs ?? 30_000,
  });
  const scheduler = opts.withScheduler
    ? await startSyncScheduler({ config, logger, runtime: pool.runtime, jobsDir: opts.jobsDir ?? 'jobs' })
    : null;
  await new Promise<void>((resolve) => {
    onShutdown(
      async () => {
        await scheduler?.close();
        await pool.close();
        logger.info('worker stopped');
        resolve();
      },
      // Scheduler and pool close one after the other, each within its close timeout.
      { forceAfterMs: (scheduler ? 2 : 1) * (opts.closeTimeoutMs ?? 30_000) + SHUTDOWN_GRACE_MS },
    );
  });
}
