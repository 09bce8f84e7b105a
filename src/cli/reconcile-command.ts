// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import { Option, type Command } from 'commander';
import { RECONCILE_OPERATIONS } from '../crm/light.js';
import type { ReconcileOptions } from './reconcile-action.js';
import { helpFooter, positiveInt, sourceFileOptions } from './options.js';

const actions = () => import('./reconcile-action.js');

export function registerReconcileCommand(program: Command): void {
  program
    .command('reconcile')
    .argument('<file>', 'CSV, NDJSON or JSON array file')
    .description(
      'Show what a reconciled import would do, without sending anything: pages the CRM, matches each row ' +
        '(by id, or by --match key) and counts update / create / skip (unchanged) / not-found / ambiguous / invalid.',
    )
    .addOption(
      new Option('--op <operation>', 'what each row does (deal.upsert: update by key, create what is missing)')
        .choices(RECONCILE_OPERATIONS)
        .makeOptionMandatory(),
    )
    .requiredOption('-w, --workspace <name>', 'workspace from the config')
    .option('--match <key>', 'match rows without an id by this key (email, unique_number, name, …)')
    .option(
      '--key-column <column>',
      'source column holding the key (default: the column mapped to it, or named like it)',
    )
    .option('-m, --mapping <file>', 'JSON file mapping source columns to API fields')
    .addOption(sourceFileOptions.format())
    .addOption(sourceFileOptions.delimiter())
    .addOption(sourceFileOptions.ignoreUnknownColumns())
    .option('-o, --out <file>', 'write the plan (one line per row) as CSV to this file; "-" for stdout')
    .option('--page-size <n>', 'records per list request', positiveInt, DEFAULTS.client.pageSize)
    .option('--json', 'print the counts as JSON')
    .addHelpText(
      'after',
      helpFooter(
        '\nExample:\n  crm-sync reconcile samples/contacts-sync.csv --op contact.update -w acme --match email --out plan.csv',
      ),
    )
    .action(async (file: string, opts: ReconcileOptions, command: Command) =>
      (await actions()).reconcileCommand(file, opts, command),
    );
}
