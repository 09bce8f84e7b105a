// What `crm-sync plans …` does, loaded by plans-command.ts only when a subcommand runs.
import { once } from 'node:events';
import { createWriteStream, mkdirSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { stringify } from 'csv-stringify/sync';
import type { Command } from 'commander';
import { CrmSyncError } from '../errors/index.js';
import { PlanStore, refusal, type PlanRecord, type PlanRow } from '../plans/light.js';
import { canonicalFromRow, formatPlanCounts, showCanonical } from '../reconcile/index.js';
import { escapeCsvCell } from '../runs/index.js';
import { withStore } from './context.js';
import type { ShowPlanCliOptions } from './plans-command.js';

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

/** `204 requests (200 writes, 4 list pages), about 3 s at 100 requests per 1 s` */
export function predictionWords(plan: PlanRecord): string {
  const p = plan.prediction;
  const parts = `${p.requests} requests (${p.writes} writes, ${p.listPages} list pages for the drift check)`;
  return p.seconds !== undefined
    ? `${parts}, about ${durationWords(p.seconds)} at ${p.limit}`
    : `${parts}; how long is not known: the workspace has no known rate limit (unknown limit)`;
}

function durationWords(seconds: number): string {
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
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

/** The changes of a row, in words: `name: "Ann" -> "Anna"`. */
function changesOf(row: PlanRow): Array<{ field: string; before: string; after: string }> {
  if (row.action === 'create')
    return Object.entries(row.fields ?? {}).map(([field, v]) => ({
      field,
      before: '',
      after: showCanonical(canonicalFromRow(field, v)),
    }));
  return Object.entries(row.before ?? {}).map(([field, before]) => ({
    field,
    before: showCanonical(before ?? undefined),
    after: showCanonical(canonicalFromRow(field, row.fields?.[field])),
  }));
}

function rowFilter(opts: Pick<ShowPlanCliOptions, 'action' | 'field' | 'text'>): (row: PlanRow) => boolean {
  const text = opts.text?.toLowerCase();
  return (row) => {
    if (opts.action !== undefined && row.action !== opts.action) return false;
    if (opts.field !== undefined && !changesOf(row).some((c) => c.field === opts.field)) return false;
    if (text !== undefined) {
      const hay = [row.recordId, row.key, row.ref, row.message, ...changesOf(row).flatMap((c) => [c.before, c.after])];
      if (!hay.some((h) => h?.toLowerCase().includes(text))) return false;
    }
    return true;
  };
}

export async function showPlan(id: string, opts: ShowPlanCliOptions, command: Command): Promise<void> {
  await withStore(command, async (scope) => {
    const store = planStore(scope);
    const plan = await store.require(id);
    const rows = await store.page(plan, opts.offset, opts.rows, rowFilter(opts));
    if (opts.json) {
      process.stdout.write(`${JSON.stringify({ plan, rows }, null, 2)}\n`);
      return;
    }
    const lines = [
      `Plan ${plan.id}: ${plan.operation} on ${plan.workspace} from ${plan.source}`,
      `  status: ${statusWords(plan)}${plan.approval ? ` · approved ${plan.approval.at} by ${plan.approval.by}` : ''} · expires ${plan.expiresAt}`,
      `  rows: ${plan.rows}: ${formatPlanCounts(plan.counts)}`,
      `  apply would take ${predictionWords(plan)}`,
    ];
    for (const r of rows) {
      const where = `row ${r.row}${r.line !== undefined ? ` (line ${r.line})` : ''}`;
      const record = r.recordId !== undefined ? ` ${r.recordId}` : r.key !== undefined ? ` ${r.key}` : '';
      const changes = changesOf(r)
        .map((c) => `${c.field}: ${JSON.stringify(c.before)} -> ${JSON.stringify(c.after)}`)
        .join('; ');
      lines.push(
        `  ${where}: ${r.action}${record}${changes ? `: ${changes}` : ''}${r.message ? ` (${r.message})` : ''}`,
      );
    }
    if (rows.length === opts.rows) lines.push(`  … more with --offset ${opts.offset + opts.rows}`);
    process.stdout.write(`${lines.join('\n')}\n`);
  });
}

export const PLAN_EXPORT_COLUMNS = ['row', 'line', 'action', 'record_id', 'key', 'field', 'before', 'after', 'message'];

export async function exportPlan(id: string, opts: { out?: string }, command: Command): Promise<void> {
  await withStore(command, async (scope) => {
    const store = planStore(scope);
    const plan = await store.require(id);
    let path = opts.out;
    if (path === undefined) {
      mkdirSync(scope.config.resultsDir, { recursive: true });
      path = join(scope.config.resultsDir, `${id}.csv`);
    }
    const out: NodeJS.WritableStream = path === '-' ? process.stdout : createWriteStream(path);
    const line = (cells: string[]) => stringify([cells.map(escapeCsvCell)]);
    out.write(line(PLAN_EXPORT_COLUMNS));
    let lines = 0;
    for await (const r of store.rows(plan)) {
      const base = [String(r.row), r.line !== undefined ? String(r.line) : '', r.action, r.recordId ?? '', r.key ?? ''];
      const changes = changesOf(r);
      const each = changes.length > 0 ? changes : [{ field: '', before: '', after: '' }];
      for (const c of each) {
        if (!out.write(line([...base, c.field, c.before, c.after, r.message ?? '']))) {
          await once(out, 'drain');
        }
        lines++;
      }
    }
    if (out !== process.stdout) {
      out.end();
      await finished(out);
      process.stdout.write(`${lines} lines written to ${path}\n`);
    }
  });
}

export async function approvePlan(id: string, command: Command): Promise<void> {
  await withStore(command, async (scope) => {
    const store = planStore(scope);
    const plan = await store.require(id);
    const move = await store.approve(id, cliApprover());
    if (!move.ok) throw notMoved(plan, move.why, 'approved');
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
    if (!move.ok) throw notMoved(plan, move.why, 'discarded');
    process.stdout.write(`plan ${id} discarded: it can no longer be approved or applied\n`);
  });
}

function notMoved(plan: PlanRecord, why: string, verb: string): CrmSyncError {
  if (why === 'applied' || why === 'applying' || why === 'expired' || why === 'discarded') {
    const err = refusal(plan, { ok: false, why, status: plan.status });
    return new CrmSyncError('PLAN_REFUSED', err.message.replace('cannot be applied', `cannot be ${verb}`));
  }
  return new CrmSyncError('PLAN_REFUSED', `plan ${plan.id} cannot be ${verb} (${why})`);
}
