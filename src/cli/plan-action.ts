// What `crm-sync plan` does, loaded by plan-command.ts only when the command runs.
import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import type { Command } from 'commander';
import { getWorkspace } from '../config/index.js';
import { readMappingFile } from '../ingest/index.js';
// The light surfaces: `plan` loads neither the queue nor the workers (bench/RESULTS.md, "Change control").
import { makePlan, PlanStore } from '../plans/light.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { formatPlanCounts } from '../reconcile/light.js';
import { namesWords } from './names-words.js';
import { createCrmClient } from '../crm/index.js';
import { referenceStoreOf } from '../references/index.js';
import { openStore } from '../runtime/light.js';
import { cliContext } from './context.js';
import { openImportSource } from './import-source.js';
import { predictionWords } from './plan-words.js';
import type { MatchOptions } from './options.js';
import { printSourceNotes } from './source-notes.js';

export interface PlanOptions extends MatchOptions {
  query?: string;
  dbUrlEnv?: string;
  dbUrlFile?: string;
  rowKey?: string;
  out?: string;
  /** Always set by commander (DEFAULTS.client.pageSize). */
  pageSize: number;
  json?: boolean;
}

export async function runPlan(file: string | undefined, opts: PlanOptions, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  const ws = getWorkspace(config, opts.workspace);
  const mapping = opts.mapping ? readMappingFile(opts.mapping) : undefined;
  const source = await openImportSource(file, { ...opts, fromPostgres: opts.query !== undefined }, config.resultsDir);
  const { redis } = await openStore(config);
  const client = createCrmClient(config, opts.workspace, logger);
  const out = opts.out === '-' ? process.stdout : opts.out ? createWriteStream(opts.out) : undefined;
  try {
    const { plan, index, summary } = await makePlan({
      store: new PlanStore({ redis, prefix: config.prefix }),
      file: source,
      op: opts.op,
      workspace: opts.workspace,
      client,
      budget: workspaceRequestBudget(redis, config, opts.workspace, client),
      references: { store: referenceStoreOf(config, opts.workspace, redis), maxAgeMs: ws.referencesMaxAgeMs },
      ...(opts.match ? { matchKey: opts.match } : {}),
      ...(opts.keyColumn ? { keyColumn: opts.keyColumn } : {}),
      ...(mapping ? { mapping } : {}),
      ...(opts.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
      settings: { planTtlMs: ws.planTtlMs, driftMaxAgeMs: ws.driftMaxAgeMs, rateLimit: ws.rateLimit },
      onChecked: printSourceNotes,
      pageSize: opts.pageSize,
      ...(out ? { out } : {}),
      logger,
    });
    const text = opts.json
      ? JSON.stringify(
          {
            planId: plan.id,
            counts: plan.counts,
            prediction: plan.prediction,
            expiresAt: plan.expiresAt,
            names: summary.names,
            unresolved: summary.unresolved,
          },
          null,
          2,
        )
      : [
          `plan ${plan.id} for ${plan.rows} rows (${plan.operation} on ${plan.workspace}): ${formatPlanCounts(plan.counts)}`,
          `  apply would take ${predictionWords(plan)}`,
          ...namesWords(summary),
          `  CRM read: ${index.records} records, ${index.pages + (index.referencePages ?? 0)} list requests; nothing was sent`,
          `  expires ${plan.expiresAt}${ws.requireApproval ? '; this workspace requires approval before apply' : ''}`,
          `  review: crm-sync plans show ${plan.id}   approve: crm-sync plans approve ${plan.id}   apply: crm-sync apply ${plan.id} --wait`,
        ].join('\n');
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
