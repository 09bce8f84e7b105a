// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import { helpFooter, list, positiveInt } from './options.js';
import type { WorkerOptions } from './worker-action.js';

export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description(
      'Process queued rows: call the CRM, respect its rate limit (shared by all worker processes through Redis), ' +
        'retry what may pass, record a result for every row. Runs until SIGINT/SIGTERM, then finishes in-flight requests.',
    )
    .option('-w, --workspace <names>', 'workspaces to serve, comma-separated (default: all configured)', list)
    .option(
      '--concurrency <n>',
      'requests in flight per workspace in this process',
      positiveInt,
      DEFAULTS.worker.concurrency,
    )
    .option(
      '--lock-ms <ms>',
      "job lock: a crashed worker's rows return to the queue after this",
      positiveInt,
      DEFAULTS.worker.lockDurationMs,
    )
    .option(
      '--close-timeout-ms <ms>',
      'how long shutdown waits for in-flight requests',
      positiveInt,
      DEFAULTS.worker.closeTimeoutMs,
    )
    .option('--with-scheduler', 'also turn ticks of the installed sync schedules into runs (see "crm-sync scheduler")')
    .option('--jobs-dir <dir>', 'sync definitions, with --with-scheduler', DEFAULTS.scheduler.jobsDir)
    .addHelpText(
      'after',
      helpFooter(
        '\nScale out by starting more worker processes (or containers); they share the limit.\n' +
          'A worker holds a Redis connection only for workspaces with rows queued (an idle one costs nothing); ' +
          'without -w it also serves workspaces added to the config file later, without a restart.',
      ),
    )
    .action(async (opts: WorkerOptions, command: Command) =>
      (await import('./worker-action.js')).runWorker(opts, command),
    );
}
