import { asSource } from '../ingest/index.js';
import { OPERATION_TABLE, isCreatePayload, isUpdatePayload } from '../crm/index.js';
import {
  defaultMatchKey,
  planReconcile,
  writeOperation,
  type IndexStats,
  type PlannedRow,
  type PlanSummary,
  type ReconcileOperation,
  type ReconcileSourceOptions,
} from '../reconcile/light.js';
import { ApplyReads, predictApply } from './apply-prediction.js';
import type { PlanStore } from './plan-store.js';
import type { PlanRecord, PlanRow } from './plan-types.js';

/**
 * The source, the CRM and the match are reconcile's options (ReconcileSourceOptions: one place
 * documents them and their defaults); a plan adds where it is stored and the workspace's settings.
 */
export interface MakePlanOptions extends Omit<ReconcileSourceOptions, 'listVersion'> {
  store: PlanStore;
  /** The workspace's settings the plan needs: its life, its known limit, the drift check's spacing. */
  settings: { planTtlMs: number; driftMaxAgeMs: number; rateLimit?: { max: number; durationMs: number } | undefined };
  /** The plan as CSV too (reconcile's plan CSV), one line per row. */
  out?: NodeJS.WritableStream;
  /** A nightly sync's tick makes the plan: its name goes on the plan, and on the run that applies it. */
  syncName?: string;
}

export interface MakePlanResult {
  plan: PlanRecord;
  index: IndexStats;
  /** Per field: rows that change it, empty it, or have it held back (what a sync's guard judges). */
  summary: PlanSummary;
}

/**
 * `crm-sync plan`: reconcile's planner (the same source checks, list pages in the workspace's
 * budget, matching and diffing) with every row stored in a plan instead of sent. Nothing is written
 * to the CRM.
 */
export async function makePlan(options: MakePlanOptions): Promise<MakePlanResult> {
  const matchKey = options.matchKey ?? defaultMatchKey(options.op);
  // A path is opened as the reconcile would open it; the plan is named by the source's label.
  const file = asSource(options.file, {
    ...(options.format ? { format: options.format } : {}),
    ...(options.delimiter ? { delimiter: options.delimiter } : {}),
  });
  const writer = await options.store.begin({
    workspace: options.workspace,
    operation: options.op,
    source: file.label,
    matchKey,
    ttlMs: options.settings.planTtlMs,
    ...(options.syncName !== undefined ? { syncName: options.syncName } : {}),
  });
  const fields = new Set<string>();
  const reads = new ApplyReads();
  const result = await planReconcile({
    ...options,
    file,
    matchKey,
    keepPlaces: true,
    onRow: async (row, place) => {
      const stored = planRowOf(options.op, row);
      if (stored.action === 'update' && place !== undefined) stored.place = place;
      if (stored.action === 'update' || stored.action === 'create') reads.write(stored.place);
      for (const f of Object.keys(stored.fields ?? {})) fields.add(f);
      await writer.add(stored);
    },
  });
  const plan = await writer.finish({
    counts: result.counts,
    rows: result.rows,
    fields: [...fields],
    prediction: predictApply(reads, result.index.records, options),
    dialect: result.dialect,
  });
  return { plan, index: result.index, summary: result.summary };
}

/** The cell text of each field in `fields` sent for a name (tag lists' items joined with `; `). */
function namesOf(row: PlannedRow, fields: ReadonlySet<string>): Record<string, string> | undefined {
  const out: Record<string, string[]> = {};
  for (const n of row.names ?? []) if (fields.has(n.field)) (out[n.field] ??= []).push(n.text);
  const entries = Object.entries(out);
  return entries.length > 0 ? Object.fromEntries(entries.map(([f, texts]) => [f, texts.join('; ')])) : undefined;
}

/** What a planned row keeps: an update only the fields it changes (and those the API requires), with their before-values. */
export function planRowOf(op: ReconcileOperation, row: PlannedRow): PlanRow {
  const out: PlanRow = {
    row: row.row,
    ...(row.line !== undefined ? { line: row.line } : {}),
    ...(row.ref !== undefined ? { ref: row.ref } : {}),
    action: row.action,
    ...(row.recordId !== undefined ? { recordId: row.recordId } : {}),
    ...(row.key !== undefined ? { key: row.key } : {}),
  };
  const payload = row.payload;
  if (row.action === 'update' && payload && isUpdatePayload(payload)) {
    const required = OPERATION_TABLE[writeOperation(op)].updateRequired;
    const changes = row.changes ?? [];
    const send = new Set([...changes.map((c) => c.field), ...required]);
    const all = payload.fields as Record<string, unknown>;
    out.fields = Object.fromEntries(Object.entries(all).filter(([f, v]) => send.has(f) && v !== undefined));
    out.before = Object.fromEntries(changes.map((c) => [c.field, c.current ?? null]));
    const names = namesOf(row, new Set(changes.map((c) => c.field)));
    if (names) out.names = names;
  } else if (row.action === 'create' && payload && isCreatePayload(payload)) {
    out.fields = payload.fields as Record<string, unknown>;
    if (payload.match !== undefined) out.match = payload.match;
    const names = namesOf(row, new Set(Object.keys(out.fields)));
    if (names) out.names = names;
  } else if (row.outcome) {
    if (row.outcome.code !== undefined) out.code = row.outcome.code;
    out.message = row.outcome.message;
  } else if (row.errors) {
    out.code = row.code ?? 'ROW_INVALID';
    out.message = row.errors.map((e) => `${e.field}: ${e.message}`).join('; ');
  }
  return out;
}
