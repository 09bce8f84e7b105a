// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import type { PlanOptions } from './plan-action.js';
import { DEFAULT_DB_URL_ENV, helpFooter, positiveInt, matchOptions } from './options.js';

export function registerPlanCommand(program: Command): void {
  matchOptions(program.command('plan'))
    .argument('[file]', 'CSV, NDJSON or JSON array file; "-" reads stdin; none with --query')
    .description(
      'Store a plan of what an import would change, without sending anything: pages the CRM (list pages in the ' +
        "workspace's rate budget), matches each row and keeps, per row, its record, its action (update / create / " +
        "skip / not-found / ambiguous / invalid) and each field's CRM value now and new value. Review it with " +
        '"plans show", approve it with "plans approve", send exactly it with "apply".',
    )
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
