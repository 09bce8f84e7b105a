// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import { Option, type Command } from 'commander';
import { RECONCILE_OPERATIONS } from '../crm/light.js';
import type { PlanOptions } from './plan-action.js';
import { DEFAULT_DB_URL_ENV, helpFooter, positiveInt, sourceFileOptions } from './options.js';

export function registerPlanCommand(program: Command): void {
  program
    .command('plan')
    .argument('[file]', 'CSV, NDJSON or JSON array file; "-" reads stdin; none with --query')
    .description(
      'Store a plan of what an import would change, without sending anything: pages the CRM (list pages in the ' +
        "workspace's rate budget), matches each row and keeps, per row, its record, its action (update / create / " +
        "skip / not-found / ambiguous / invalid) and each field's CRM value now and new value. Review it with " +
        '"plans show", approve it with "plans approve", send exactly it with "apply".',
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
    .option(
      '--query <sql>',
      'read the rows from this PostgreSQL SELECT instead of a file (read-only, through a cursor)',
    )
    .option(
      '--db-url-env <name>',
      `with --query: env variable holding the connection string (default ${DEFAULT_DB_URL_ENV})`,
    )
    .option('--db-url-file <path>', 'with --query: file holding the connection string')
    .option('--row-key <column>', 'with --query: column naming each row')
    .option('-o, --out <file>', 'also write the plan (one line per row) as CSV to this file; "-" for stdout')
    .option('--page-size <n>', 'records per list request', positiveInt, DEFAULTS.client.pageSize)
    .option('--json', 'print {"planId", "counts", …} as JSON')
    .addHelpText(
      'after',
      helpFooter(
        `
Examples:
  crm-sync plan contacts.csv --op contact.update -w acme --match email
  crm-sync plans show <planId>
  crm-sync plans approve <planId>
  crm-sync apply <planId> --wait

The plan lives planTtlMs (default 24 h) and is applied once. Nothing is written to the CRM. Exit code 1 when rows matched no record, several, or were invalid (the plan is stored all the same).`,
      ),
    )
    .action(async (file: string | undefined, opts: PlanOptions, command: Command) =>
      (await import('./plan-action.js')).runPlan(file, opts, command),
    );
}
