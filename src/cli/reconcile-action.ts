// What `crm-sync reconcile` does, loaded by reconcile-command.ts only when the command runs (its
// options and help are declared there).
import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import type { Command } from 'commander';
import { getWorkspace } from '../config/index.js';
import { readMappingFile } from '../ingest/index.js';
import { formatPlanCounts, planReconcile, topFields, type FieldTally } from '../reconcile/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { referenceStoreOf } from '../references/index.js';
import { createCrmClient } from '../runtime/index.js';
import { openStore } from '../runtime/light.js';
import { cliContext } from './context.js';
import type { MatchOptions } from './options.js';
import { printSourceNotes } from './source-notes.js';

export interface ReconcileOptions extends MatchOptions {
  out?: string;
  /** Always set by commander (reconcile-command.ts, DEFAULTS.client.pageSize). */
  pageSize: number;
  json?: boolean;
}

export async function reconcileCommand(file: string, opts: ReconcileOptions, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  const ws = getWorkspace(config, opts.workspace);
  // Nothing is stored, but every list page takes its token from the workspace's one budget
  // (in Redis, shared with its workers and every other command), so reconcile never outruns it.
  const { redis } = await openStore(config);
  const client = createCrmClient(config, opts.workspace, logger);
  const out = opts.out === '-' ? process.stdout : opts.out ? createWriteStream(opts.out) : undefined;
  try {
    const plan = await planReconcile({
      file,
      op: opts.op,
      workspace: opts.workspace,
      client,
      budget: workspaceRequestBudget(redis, config, opts.workspace, client),
      references: { store: referenceStoreOf(config, opts.workspace, redis), maxAgeMs: ws.referencesMaxAgeMs },
      ...(opts.match ? { matchKey: opts.match } : {}),
      ...(opts.keyColumn ? { keyColumn: opts.keyColumn } : {}),
      ...(opts.mapping ? { mapping: readMappingFile(opts.mapping) } : {}),
      ...(opts.format ? { format: opts.format } : {}),
      ...(opts.delimiter ? { delimiter: opts.delimiter } : {}),
      ...(opts.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
      onChecked: printSourceNotes,
      pageSize: opts.pageSize,
      ...(out ? { out } : {}),
      logger,
    });
    const text = opts.json
      ? JSON.stringify(plan, null, 2)
      : `plan for ${plan.rows} rows: ${formatPlanCounts(plan.counts)}\n${heldLine(plan.summary.held)}  (CRM index: ${plan.index.records} records, ${plan.index.pages} list requests, ${plan.index.ms} ms; nothing was sent)`;
    (opts.out === '-' ? process.stderr : process.stdout).write(`${text}\n`);
    process.exitCode = plan.counts.invalid + plan.counts['not-found'] + plan.counts.ambiguous > 0 ? 1 : 0;
  } finally {
    client.close();
    redis.disconnect();
    if (out && out !== process.stdout) {
      out.end();
      await finished(out);
    }
  }
}

/** `  held back by write policies: phone_number in 12 rows, name in 3 rows` (with a newline), or nothing. */
function heldLine(held: FieldTally): string {
  const top = topFields(held, 10);
  if (top.length === 0) return '';
  return `  held back by write policies: ${top.map(([f, n]) => `${f} in ${n} row${n === 1 ? '' : 's'}`).join(', ')}\n`;
}
