import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import { Option, type Command } from 'commander';
import { getWorkspace } from '../config/index.js';
import { readMappingFile, type SourceFormat } from '../ingest/index.js';
import { formatPlanCounts, planReconcile, RECONCILE_OPERATIONS, type ReconcileOperation } from '../reconcile/index.js';
import { createCrmClient } from '../runtime/index.js';
import { cliContext } from './context.js';
import { positiveInt, sourceFileOptions } from './options.js';
import { sourceNotes } from './source-notes.js';

interface ReconcileOptions {
  op: ReconcileOperation;
  workspace: string;
  match?: string;
  keyColumn?: string;
  mapping?: string;
  format?: SourceFormat;
  delimiter?: string;
  ignoreUnknownColumns?: boolean;
  out?: string;
  pageSize?: number;
  json?: boolean;
}

export function registerReconcileCommand(program: Command): void {
  program
    .command('reconcile')
    .argument('<file>', 'CSV, NDJSON or JSON array file')
    .description(
      'Show what a reconciled import would do, without sending anything: pages the CRM, matches each row\n' +
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
    .option('--page-size <n>', 'records per list request', positiveInt, 100)
    .option('--json', 'print the counts as JSON')
    .addHelpText(
      'after',
      '\nExample:\n  crm-sync reconcile samples/contacts-sync.csv --op contact.update -w acme --match email --out plan.csv',
    )
    .action(async (file: string, opts: ReconcileOptions, command: Command) => {
      const { config, logger } = cliContext(command);
      getWorkspace(config, opts.workspace);
      const client = createCrmClient(config, opts.workspace, logger);
      const out = opts.out === '-' ? process.stdout : opts.out ? createWriteStream(opts.out) : undefined;
      try {
        const plan = await planReconcile({
          file,
          op: opts.op,
          workspace: opts.workspace,
          client,
          ...(opts.match ? { matchKey: opts.match } : {}),
          ...(opts.keyColumn ? { keyColumn: opts.keyColumn } : {}),
          ...(opts.mapping ? { mapping: readMappingFile(opts.mapping) } : {}),
          ...(opts.format ? { format: opts.format } : {}),
          ...(opts.delimiter ? { delimiter: opts.delimiter } : {}),
          ...(opts.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
          onChecked: (...checked) => {
            for (const note of sourceNotes(...checked)) process.stderr.write(`${note}\n`);
          },
          pageSize: opts.pageSize ?? 100,
          ...(out ? { out } : {}),
          logger,
        });
        const text = opts.json
          ? JSON.stringify(plan, null, 2)
          : `plan for ${plan.rows} rows: ${formatPlanCounts(plan.counts)}\n  (CRM index: ${plan.index.records} records, ${plan.index.pages} list requests, ${plan.index.ms} ms; nothing was sent)`;
        (opts.out === '-' ? process.stderr : process.stdout).write(`${text}\n`);
        process.exitCode = plan.counts.invalid + plan.counts['not-found'] + plan.counts.ambiguous > 0 ? 1 : 0;
      } finally {
        client.close();
        if (out && out !== process.stdout) {
          out.end();
          await finished(out);
        }
      }
    });
}
