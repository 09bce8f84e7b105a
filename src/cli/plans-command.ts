import { Option, type Command } from 'commander';
import { exportDialectOptions, helpFooter, positiveInt, type ExportDialectOptions } from './options.js';
import type { ShowPlanCliOptions } from './plans-actions.js';

// The declarations only: each action loads the plan store when it runs.
const actions = () => import('./plans-actions.js');

const ACTIONS = ['update', 'create', 'skip', 'not-found', 'ambiguous', 'invalid'];

export function registerPlansCommand(program: Command): void {
  const plans = program
    .command('plans')
    .description('Stored plans ("crm-sync plan"): list, review, export, approve or discard them')
    .addHelpText(
      'after',
      helpFooter(
        `
A plan is applied with "crm-sync apply <planId>", once, before it expires (planTtlMs, default 24 h). A workspace with "requireApproval": true refuses to apply a plan nobody approved.`,
      ),
    );

  plans
    .command('list')
    .description('Plans, newest first, with their status (pending, approved, applying, applied, discarded, expired)')
    .option('-w, --workspace <name>', 'only this workspace')
    .option('--limit <n>', 'how many', positiveInt, 50)
    .option('--json', 'JSON output')
    .action(async (opts: { workspace?: string; limit: number; json?: boolean }, command: Command) =>
      (await actions()).listPlans(opts, command),
    );

  plans
    .command('show')
    .argument('<id>', 'plan id')
    .description("A plan's counts, approval and prediction, and its rows with each field's before → after")
    .addOption(new Option('--action <action>', 'only rows with this action').choices(ACTIONS))
    .option('--field <field>', 'only rows that change this field')
    .option('--text <text>', 'only rows whose record id, key, values or message contain this text')
    .option('--rows <n>', 'how many rows to list', positiveInt, 20)
    .option('--offset <n>', 'rows to pass over first (paging)', (v) => Number.parseInt(v, 10), 0)
    .option('--json', 'JSON output')
    .action(async (id: string, opts: ShowPlanCliOptions, command: Command) =>
      (await actions()).showPlan(id, opts, command),
    );

  exportDialectOptions(
    plans
      .command('export')
      .argument('<id>', 'plan id')
      .description(
        'Write the plan as CSV, one line per field change (rows without a change: one line), spreadsheet-safe, ' +
          'written as the source file was (its delimiter, BOM and line ends) unless the options below say otherwise',
      )
      .option('-o, --out <file>', 'output file, or - for stdout (default: <resultsDir>/<id>.csv)'),
  ).action(async (id: string, opts: { out?: string } & ExportDialectOptions, command: Command) =>
    (await actions()).exportPlan(id, opts, command),
  );

  plans
    .command('approve')
    .argument('<id>', 'plan id')
    .description(
      'Approve a plan (recorded with when and by whom: this user at this host); refused when expired, discarded or applied',
    )
    .action(async (id: string, _opts: unknown, command: Command) => (await actions()).approvePlan(id, command));

  plans
    .command('discard')
    .argument('<id>', 'plan id')
    .description('Discard a plan: it can no longer be approved or applied')
    .action(async (id: string, _opts: unknown, command: Command) => (await actions()).discardPlan(id, command));
}
