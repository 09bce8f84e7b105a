// What `crm-sync plans …` does, loaded by plans-command.ts only when a subcommand runs.
import { createWriteStream, mkdirSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import type { Command } from 'commander';
import { CrmSyncError } from '../errors/index.js';
import {
  afterWords,
  planChanges,
  planRowFilter,
  PlanStore,
  refusal,
  writePlanCsv,
  type PlanMove,
  type PlanRecord,
} from '../plans/index.js';
import { formatPlanCounts } from '../reconcile/index.js';
import { withStore } from './context.js';
import { givenDialect, type ExportDialectOptions } from './options.js';
import { predictionWords } from './plan-words.js';

/** Who approves from the command line: `cli:<user>@<host>`. */
export function cliApprover(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the host still says where.
  }
  return `cli:${user}@${hostname()}`;
}

export function statusWords(plan: PlanRecord): string {
  if (plan.expired) return `expired (${plan.status} until ${plan.expiresAt})`;
  if (plan.status === 'applied' || plan.status === 'applying') return `${plan.status} by run ${plan.runId ?? '?'}`;
  return plan.status;
}

function planStore(scope: { redis: PlanStore['redis']; config: { prefix: string } }): PlanStore {
  return new PlanStore({ redis: scope.redis, prefix: scope.config.prefix });
}

export async function listPlans(
  opts: { workspace?: string; limit: number; json?: boolean },
  command: Command,
): Promise<void> {
  await withStore(command, async (scope) => {
    const plans = await planStore(scope).list({
      ...(opts.workspace !== undefined ? { workspace: opts.workspace } : {}),
      limit: opts.limit,
    });
    if (opts.json) {
      process.stdout.write(`${JSON.stringify({ plans }, null, 2)}\n`);
      return;
    }
    if (plans.length === 0) process.stdout.write('no plans\n');
    for (const p of plans)
      process.stdout.write(
        `${p.id}  ${p.workspace}  ${p.operation}  ${statusWords(p)}  ${p.rows} rows: ${formatPlanCounts(p.counts)}  created ${p.createdAt}\n`,
      );
  });
}

/** `plans show`'s options, as commander gives them (declared in plans-command.ts). */
export interface ShowPlanCliOptions {
  action?: string;
  field?: string;
  text?: string;
  rows: number;
  offset: number;
  json?: boolean;
}
export async function showPlan(id: string, opts: ShowPlanCliOptions, command: Command): Promise<void> {
  await withStore(command, async (scope) => {
    const store = planStore(scope);
    const plan = await store.require(id);
    const rows = await store.page(plan, opts.offset, opts.rows, planRowFilter(opts));
    if (opts.json) {
      process.stdout.write(`${JSON.stringify({ plan, rows }, null, 2)}\n`);
      return;
    }
    const lines = [
      `Plan ${plan.id}: ${plan.operation} on ${plan.workspace} from ${plan.source}`,
      `  status: ${statusWords(plan)}${plan.approval ? ` · approved ${plan.approval.at} by ${plan.approval.by}` : ''} · expires ${plan.expiresAt}`,
      `  rows: ${plan.rows}: ${formatPlanCounts(plan.counts)}`,
      `  apply would take ${predictionWords(plan)}`,
      ...(plan.syncName !== undefined
        ? [`  made by a tick of sync ${plan.syncName}; its run carries the sync's name`]
        : []),
      ...(plan.reason !== undefined ? [`  ${plan.reason}`] : []),
    ];
    for (const r of rows) {
      const where = `row ${r.row}${r.line !== undefined ? ` (line ${r.line})` : ''}`;
      const record = r.recordId !== undefined ? ` ${r.recordId}` : r.key !== undefined ? ` ${r.key}` : '';
      const changes = planChanges(r)
        .map((c) => `${c.field}: ${JSON.stringify(c.before)} -> ${afterWords(c)}`)
        .join('; ');
      lines.push(
        `  ${where}: ${r.action}${record}${changes ? `: ${changes}` : ''}${r.message ? ` (${r.message})` : ''}`,
      );
    }
    if (rows.length === opts.rows) lines.push(`  … more with --offset ${opts.offset + opts.rows}`);
    process.stdout.write(`${lines.join('\n')}\n`);
  });
}

export async function exportPlan(
  id: string,
  opts: { out?: string } & ExportDialectOptions,
  command: Command,
): Promise<void> {
  const dialect = givenDialect(opts);
  await withStore(command, async (scope) => {
    const store = planStore(scope);
    const plan = await store.require(id);
    let path = opts.out;
    if (path === undefined) {
      mkdirSync(scope.config.resultsDir, { recursive: true });
      path = join(scope.config.resultsDir, `${id}.csv`);
    }
    if (path === '-') {
      await writePlanCsv(store, plan, process.stdout, undefined, dialect);
      return;
    }
    const out = createWriteStream(path);
    const lines = await writePlanCsv(store, plan, out, undefined, dialect);
    out.end();
    await finished(out);
    process.stdout.write(`${lines} lines written to ${path}\n`);
  });
}

export async function approvePlan(id: string, command: Command): Promise<void> {
  await withStore(command, async (scope) => {
    const store = planStore(scope);
    const plan = await store.require(id);
    const move = await store.approve(id, cliApprover());
    if (!move.ok) throw notMoved(plan, move, 'approved');
    const now = await store.require(id);
    process.stdout.write(
      `plan ${id} approved${now.approval ? ` by ${now.approval.by} at ${now.approval.at}` : ''}; apply it with: crm-sync apply ${id} --wait\n`,
    );
  });
}

export async function discardPlan(id: string, command: Command): Promise<void> {
  await withStore(command, async (scope) => {
    const store = planStore(scope);
    const plan = await store.require(id);
    const move = await store.discard(id, cliApprover());
    if (!move.ok) throw notMoved(plan, move, 'discarded');
    process.stdout.write(`plan ${id} discarded: it can no longer be approved or applied\n`);
  });
}

function notMoved(plan: PlanRecord, move: Extract<PlanMove, { ok: false }>, verb: string): CrmSyncError {
  const { why } = move;
  if (
    why === 'applied' ||
    why === 'applying' ||
    why === 'expired' ||
    why === 'discarded' ||
    why === 'superseded' ||
    why === 'undone'
  ) {
    const err = refusal(plan, move);
    return new CrmSyncError('PLAN_REFUSED', err.message.replace('cannot be applied', `cannot be ${verb}`));
  }
  return new CrmSyncError('PLAN_REFUSED', `plan ${plan.id} cannot be ${verb} (${why})`);
}
