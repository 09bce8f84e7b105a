import type { Command } from 'commander';
import { startSyncScheduler } from '../schedule/index.js';
import { startWorkerPool } from '../worker/index.js';
import { cliContext } from './context.js';
import { list, positiveInt } from './options.js';
import { onShutdown, SHUTDOWN_GRACE_MS } from './shutdown.js';

interface WorkerOptions {
  workspace?: string[];
  concurrency?: number;
  lockMs?: number;
  closeTimeoutMs?: number;
  withScheduler?: boolean;
  jobsDir?: string;
}

export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description(
      'Process queued rows: call the CRM, respect its rate limit (shared by all worker processes through Redis),\n' +
        'retry what may pass, record a result for every row. Runs until SIGINT/SIGTERM, then finishes in-flight requests.',
    )
    .option('-w, --workspace <names>', 'workspaces to serve, comma-separated (default: all configured)', list)
    .option('--concurrency <n>', 'requests in flight per workspace in this process', positiveInt, 8)
    .option('--lock-ms <ms>', "job lock: a crashed worker's rows return to the queue after this", positiveInt, 30_000)
    .option('--close-timeout-ms <ms>', 'how long shutdown waits for in-flight requests', positiveInt, 30_000)
    .option('--with-scheduler', 'also turn ticks of the installed sync schedules into runs (see "crm-sync scheduler")')
    .option('--jobs-dir <dir>', 'sync definitions, with --with-scheduler', 'jobs')
    .addHelpText('after', '\nScale out by starting more worker processes (or containers); they share the limit.')
    .action(async (opts: WorkerOptions, command: Command) => {
      const { config, logger } = cliContext(command);
      const pool = await startWorkerPool({
        config,
        logger,
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
    });
}
