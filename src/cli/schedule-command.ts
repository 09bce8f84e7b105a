// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import { helpFooter, positiveInt } from './options.js';

import type { JobsOption } from './schedule-actions.js';

const actions = () => import('./schedule-actions.js');

export function registerScheduleCommand(program: Command): void {
  const schedule = program
    .command('schedule')
    .description('Nightly syncs: install the definitions in jobs/ as schedules, list, run or remove them')
    .addHelpText(
      'after',
      helpFooter(
        `
A definition is a JSON file in jobs/ (see jobs/nightly-contacts.json). "schedule sync" makes the installed schedules equal the definitions; "crm-sync scheduler" (or "crm-sync worker --with-scheduler") turns each tick into a reconciled run. History: crm-sync runs list --sync <name>.

A sync with a "guard", with "approval": "always", or in a workspace with "requireApproval": true plans each tick into a stored plan first: within the guard the plan is applied at once; otherwise it waits for approval ("crm-sync plans approve <planId>", then "crm-sync apply <planId> --wait"; or "crm-sync plans discard <planId>"), and a newer tick discards it for its own plan.`,
      ),
    );
  const jobsDir = (cmd: Command) =>
    cmd.option('--jobs-dir <dir>', 'directory of the sync definitions', DEFAULTS.scheduler.jobsDir);

  jobsDir(schedule.command('list').description('Definitions and installed schedules with their next tick')).action(
    async (opts: JobsOption, command: Command) => (await actions()).listSyncSchedules(opts, command),
  );

  jobsDir(
    schedule
      .command('sync')
      .description('Install or update every definition; remove schedules whose definition is gone'),
  ).action(async (opts: JobsOption, command: Command) => (await actions()).syncInstalledSchedules(opts, command));

  schedule
    .command('remove')
    .argument('<name>', 'sync name')
    .description('Remove an installed schedule (the definition file stays)')
    .action(async (name: string, _opts: unknown, command: Command) =>
      (await actions()).removeSyncSchedule(name, _opts, command),
    );

  jobsDir(
    schedule
      .command('run')
      .argument('<name>', 'sync name')
      .description('Run a sync now, in this process, and wait for it (workers must be running, or pass --work)')
      .option('--work', 'also process the rows in this process')
      .option('--concurrency <n>', 'requests in flight with --work', positiveInt, DEFAULTS.cli.workConcurrency)
      .option('--json', 'print the summary as JSON')
      .option(
        '--override-guard',
        'apply this tick\'s plan even if it goes over the sync\'s guard or the sync or its workspace holds every tick ("approval": "always", "requireApproval": true); you are recorded as its approver',
      ),
  ).action(
    async (
      name: string,
      opts: JobsOption & { work?: boolean; concurrency: number; json?: boolean; overrideGuard?: boolean },
      command: Command,
    ) => (await actions()).runSyncNow(name, opts, command),
  );
}
