// What `crm-sync scheduler` does, loaded by scheduler-command.ts only when the command runs (its
// options and help are declared there).
import type { Command } from 'commander';
import { derivedSettings } from '../config/index.js';
import { startSyncScheduler } from '../schedule/index.js';
import { cliContext } from './context.js';
import { serveUntilSignal } from './shutdown.js';

export async function runScheduler(
  opts: { jobsDir: string; concurrency: number; closeTimeout: number },
  command: Command,
): Promise<void> {
  const { config, logger } = cliContext(command);
  await serveUntilSignal({
    start: () =>
      startSyncScheduler({
        config,
        logger,
        jobsDir: opts.jobsDir,
        concurrency: opts.concurrency,
        closeTimeoutMs: opts.closeTimeout,
      }),
    stop: (scheduler) => scheduler.close(),
    forceAfterMs: derivedSettings({ closeTimeoutsMs: [opts.closeTimeout] }).forceExitAfterMs,
  });
  logger.info('scheduler stopped');
}
