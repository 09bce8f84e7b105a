// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import type { ReconcileOptions } from './reconcile-action.js';
import { helpFooter, positiveInt, matchOptions } from './options.js';

const actions = () => import('./reconcile-action.js');

export function registerReconcileCommand(program: Command): void {
  matchOptions(program.command('reconcile'))
    .argument('<file>', 'CSV, NDJSON or JSON array file')
    .description(
      'Show what a reconciled import would do, without sending anything: pages the CRM, matches each row ' +
        '(by id, or by --match key) and counts update / create / skip (unchanged) / not-found / ambiguous / invalid.',
    )
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
