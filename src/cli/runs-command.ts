// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import { Option, type Command } from 'commander';
import type { RunsListOptions } from './runs-list-action.js';
import type { UndoOptions } from './undo-action.js';
import { exportDialectOptions, nonNegativeInt, positiveInt, rowList, type ExportDialectOptions } from './options.js';

// The declarations only: each action loads its implementation when it runs, so `runs --help`
// loads neither BullMQ nor Redis, and `runs list` only the run store.
const actions = () => import('./runs-actions.js');

export function registerRunsCommand(program: Command): void {
  const runs = program
    .command('runs')
    .description('Inspect runs and their per-row results; export, retry or resume them');

  runs
    .command('list')
    .description('Runs, newest first')
    .addOption(
      new Option('--status <status>', 'only runs in this status').choices([
        'running',
        'blocked',
        'completed',
        'failed',
        'cancelled',
      ]),
    )
    .option('-w, --workspace <name>', 'only this workspace')
    .option('--sync <name>', 'only runs of this nightly sync')
    .option('--limit <n>', 'how many', positiveInt, DEFAULTS.cli.listLimit)
    .option('--json', 'JSON output')
    .action(async (opts: RunsListOptions, command: Command) =>
      (await import('./runs-list-action.js')).listRuns(opts, command),
    );

  runs
    .command('show')
    .argument('<id>', 'run id')
    .description('Counts and the first failed/invalid rows of a run')
    .option('--problems <n>', 'how many failed/invalid rows to list', positiveInt, DEFAULTS.cli.listLimit)
    .option(
      '--changes <n>',
      'how many written rows to list with their values before -> after',
      nonNegativeInt,
      DEFAULTS.cli.changesShown,
    )
    .option('--json', 'JSON output')
    .action(async (id: string, opts: { problems: number; changes: number; json?: boolean }, command: Command) =>
      (await actions()).showRun(id, opts, command),
    );

  exportDialectOptions(
    runs
      .command('export')
      .argument('<id>', 'run id')
      .description(
        'Write the results as CSV (safe to open in a spreadsheet): meta columns, then the original columns, ' +
          'written as the source file was (its delimiter, BOM and line ends) unless the options below say otherwise',
      )
      .option('--failed', 'only failed and invalid rows (fix them and pass the file to "runs retry --file")')
      .option('-o, --out <file>', 'output file, or - for stdout (default: <resultsDir>/<id>[-failed].csv)'),
  ).action(async (id: string, opts: { failed?: boolean; out?: string } & ExportDialectOptions, command: Command) =>
    (await actions()).exportRun(id, opts, command),
  );

  runs
    .command('undo')
    .argument('<id>', 'run id (in Redis, or archived)')
    .description(
      'Take a run back: a new run writes back the value before the run wherever the CRM still holds the value ' +
        'the run wrote; fields changed since are left and reported; deals the run created are listed (no delete)',
    )
    .option('--plan', 'only store the undo as a plan (nothing sent): review, approve and apply it')
    .option(
      '--cancel-first',
      'a run still running is cancelled first and its rows waited for, then undone (without it, an undo of a ' +
        'running run is refused, exit 2: it would put back only what was written so far)',
    )
    .option('--wait', 'follow the undo run to the end')
    .option('--work', 'also process the queue in this process (implies --wait)')
    .option('--concurrency <n>', 'requests in flight with --work', positiveInt, DEFAULTS.cli.workConcurrency)
    .option('--json', 'JSON output')
    .action(async (id: string, opts: UndoOptions, command: Command) =>
      (await import('./undo-action.js')).undoRun(id, opts, command),
    );

  runs
    .command('retry')
    .argument('<id>', 'run id')
    .description(
      "Queue the failed and invalid rows of a run again, or the rows of a corrected export; a plan run's " +
        "drifted rows are re-planned instead (the CRM's values now; nothing sent): approve and apply the new plan",
    )
    .option(
      '-f, --file <csv>',
      'a corrected "runs export --failed" file: its values replace the stored ones (refused with exit 2 in a ' +
        'workspace with "requireApproval": true: nobody approved them; plan the corrected source instead)',
    )
    .option('--rows <list>', 'only these rows, e.g. 3,7,10-12', rowList)
    .option('--wait', 'follow the run to the end')
    .option('--work', 'also process the queue in this process (implies --wait)')
    .option(
      '--resend-superseded',
      'also send rows whose every field a later run already wrote, as new writes that become the ' +
        "records' latest (default: such rows are not sent and end superseded)",
    )
    .action(
      async (
        id: string,
        opts: { file?: string; rows?: number[]; wait?: boolean; work?: boolean; resendSuperseded?: boolean },
        command: Command,
      ) => (await actions()).retryRunRows(id, opts, command),
    );

  runs
    .command('prune')
    .description(
      'Retention: archive ended runs older than the cutoff (their full results to <resultsDir>/archive/<id>.ndjson.gz, ' +
        'which "runs show" and "runs export" still read) and remove them from Redis; remove CSV files in resultsDir ' +
        'older than the cutoff. Running and blocked runs are never touched. Workers do this on their own every 10 minutes.',
    )
    .option('--older-than <duration>', "cutoff, e.g. 30d, 12h, 90m (default: the config's retention, 30 days)")
    .option('--dry-run', 'only say what would be archived and removed')
    .action(async (opts: { olderThan?: string; dryRun?: boolean }, command: Command) =>
      (await actions()).pruneOldRuns(opts, command),
    );

  runs
    .command('delete')
    .argument('<id>', 'an ended run (cancel a running one first)')
    .description("Archive the run's results to <resultsDir>/archive (unless --no-archive) and remove it from Redis")
    .option('--no-archive', 'remove without writing the archive')
    .action(async (id: string, opts: { archive: boolean }, command: Command) =>
      (await actions()).deleteRun(id, opts, command),
    );

  runs
    .command('cancel')
    .argument('<id>', 'a running or blocked run')
    .description(
      'Stop a run: rows still waiting in the queue are removed and recorded "cancelled" (exported with ' +
        'the failed rows; "runs retry" sends them), rows already being sent finish, and an import still ' +
        'reading its file stops within a few seconds. The run ends "cancelled".',
    )
    .option('--reason <text>', 'said in the run and in each cancelled row', 'cancelled by an operator')
    .action(async (id: string, opts: { reason: string }, command: Command) =>
      (await actions()).cancelRunNow(id, opts, command),
    );

  runs
    .command('resume')
    .argument('<id>', 'a blocked run, or one whose file was not read to the end')
    .description(
      "Resume a run blocked by a refused API key (fix the key first; this lifts the workspace's block, not an " +
        'operator\'s pause: see "workspace resume"), ' +
        'or go on reading the file of a run whose import stopped mid-file (killed, or Redis away too long): ' +
        'rows already queued or recorded are passed over, the rest are queued.',
    )
    .action(async (id: string, _opts: unknown, command: Command) => (await actions()).resumeRun(id, command));
}
