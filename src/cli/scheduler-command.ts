// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import { positiveInt } from './options.js';

const actions = () => import('./scheduler-action.js');

export function registerSchedulerCommand(program: Command): void {
  program
    .command('scheduler')
    .description(
      'Turn each tick of the installed sync schedules into a reconciled run (rows are sent by "crm-sync worker"). ' +
        'A sync never overlaps itself: a tick that finds its previous run still going is skipped and recorded.',
    )
    .option('--jobs-dir <dir>', 'directory of the sync definitions', DEFAULTS.scheduler.jobsDir)
    .option('--concurrency <n>', 'syncs handled at once', positiveInt, DEFAULTS.scheduler.concurrency)
    .option(
      '--close-timeout <ms>',
      'on SIGTERM, wait this long for the syncs in hand (their runs go on in the queue either way)',
      positiveInt,
      DEFAULTS.scheduler.closeTimeoutMs,
    )
    .action(async (opts: { jobsDir: string; concurrency: number; closeTimeout: number }, command: Command) =>
      (await actions()).runScheduler(opts, command),
    );
}
