// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import { Option, type Command } from 'commander';
import { OPERATIONS } from '../crm/light.js';
import type { ImportOptions } from './import-action.js';
import { DEFAULT_DB_URL_ENV, helpFooter, positiveInt, runName, sourceFileOptions } from './options.js';

// The declaration only: the action loads the pipeline (BullMQ, the CRM client, the database
// source) when it runs, so `import --help` loads none of it.
export function registerImportCommand(program: Command): void {
  program
    .command('import')
    .argument(
      '[file]',
      'CSV, NDJSON (.ndjson/.jsonl) or JSON array file; "-" reads stdin (NDJSON, or --format csv); none with --from-postgres',
    )
    .description(
      'Validate every row of a file (or stdin, or a PostgreSQL query), queue the valid ones for the workers and record ' +
        'a result for each row. Invalid rows are reported with line (or key), field and reason and never sent.',
    )
    .addOption(new Option('--op <operation>', 'what each row does').choices(OPERATIONS).makeOptionMandatory())
    .requiredOption('-w, --workspace <name>', 'workspace from the config')
    .option(
      '-m, --mapping <file>',
      'JSON file mapping source columns to API fields (default: columns named like the fields)',
    )
    .addOption(sourceFileOptions.format())
    .addOption(sourceFileOptions.delimiter())
    .addOption(sourceFileOptions.ignoreUnknownColumns())
    .option('--dry-run', 'validate and report only (the first invalid rows with their reasons); send nothing')
    .option('--wait', 'follow the run to the end (progress on stderr) and exit with its outcome')
    .option('--work', 'also process the queue in this process, no separate worker needed (implies --wait)')
    .option('--concurrency <n>', 'requests in flight with --work', positiveInt, DEFAULTS.cli.workConcurrency)
    .option(
      '--batch-size <n>',
      'emails per team-members request (team.invite)',
      positiveInt,
      DEFAULTS.producer.inviteBatchSize,
    )
    .option(
      '--high-water <n>',
      'pause reading while about this many rows wait in the queue (bounds Redis memory)',
      positiveInt,
      DEFAULTS.producer.highWaterMark,
    )
    .option(
      '--redis-outage <seconds>',
      'ride out Redis not answering this long while reading and following, then exit 5 (the run can be resumed)',
      positiveInt,
      DEFAULTS.producer.redisOutageMs / 1000,
    )
    .option(
      '--name <label>',
      "a short name for the run, shown by the dashboard (default: the file name, or the query's first table)",
      runName,
    )
    .option('--json', 'print the run as JSON on stdout at the end')
    .option(
      '--reconcile',
      'page the CRM first: match rows without ids, send only rows that differ (see "crm-sync reconcile")',
    )
    .option('--match <key>', 'with --reconcile: match rows without an id by this key (email, unique_number, name)')
    .option('--key-column <column>', 'with --reconcile: source column holding the key')
    .option('--upsert', 'with --reconcile and a deal op: update deals that match, create the missing ones')
    .option(
      '--from-postgres',
      'read the rows from a PostgreSQL query (--query) instead of a file: its columns are mapped like a header',
    )
    .option('--query <sql>', 'with --from-postgres: the SELECT to read (runs read-only, through a cursor)')
    .option(
      '--db-url-env <name>',
      `with --from-postgres: env variable holding the connection string (default ${DEFAULT_DB_URL_ENV})`,
    )
    .option('--db-url-file <path>', 'with --from-postgres: file holding the connection string (e.g. a Docker secret)')
    .option(
      '--row-key <column>',
      "with --from-postgres: column naming each row in results, exports and retries (shown where a file's line is)",
    )
    .addHelpText(
      'after',
      helpFooter(
        `
Examples:
  crm-sync import deals.csv --op deal.update --workspace acme --wait
  crm-sync import contacts.ndjson --op contact.update -w acme --mapping mapping.json --dry-run
  crm-sync import invites.csv --op team.invite -w acme --work
  some-export | crm-sync import - --op contact.update -w acme --wait
  crm-sync import - --format csv --op deal.update -w acme < deals.csv
  WAREHOUSE_URL=postgres://… crm-sync import --from-postgres \\
    --db-url-env WAREHOUSE_URL --row-key id \\
    --query 'select id, email, phone as phone_number from contacts' \\
    --op contact.update -w acme --reconcile --wait

Stdin is kept as a file under resultsDir/stdin (removed with the run's files by retention), so runs resume, retry --file and verify read it again. The database URL is never printed, logged or stored: runs record the env variable (or file) it came from, the query and the key column.

In a workspace with "requireApproval": true an import (plain or --reconcile) is refused with exit code 2 and nothing read or sent [APPROVAL_REQUIRED]; the message names the "crm-sync plan" command that plans the same file, to approve ("crm-sync plans approve") and apply ("crm-sync apply"). Not refused there: --dry-run, and team.invite (it writes no record).

A reconciled import's updates are drift-checked before they are sent, as an applied plan's: a record changed since the run read the CRM (an "if-empty" field filled in, any field the row writes) ends "drifted", not sent.

Without --wait the command runs until its last row is queued, then returns. The queue holds at most a high-water mark of rows, so a file larger than that is read only as fast as workers take rows: keep "crm-sync worker" running, and see the outcome with "crm-sync runs show <id>".`,
      ),
    )
    .action(async (file: string | undefined, opts: ImportOptions, command: Command) =>
      (await import('./import-action.js')).runImport(file, opts, command),
    );
}
