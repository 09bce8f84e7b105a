import { OPERATION_TABLE, type CrmClient } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { RequestBudget } from '../rate/index.js';
import {
  canonicalFromRow,
  emptyPlanCounts,
  RECONCILE_RESOURCE,
  RecordIndex,
  rowValueFromCanonical,
  sameCanonical,
  writeOperation,
} from '../reconcile/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { ApplyReads, predictApply } from './apply-prediction.js';
import type { MakePlanOptions } from './make-plan.js';
import type { PlanStore } from './plan-store.js';
import type { PlanRecord, PlanRow } from './plan-types.js';

export interface ReplanDriftedOptions {
  plans: PlanStore;
  store: RunStore;
  /** A run that applied a plan (`crm-sync apply`, or a guarded sync's tick). */
  run: RunRecord;
  client: CrmClient;
  /** The workspace's shared request budget: every list page takes a token. */
  budget?: RequestBudget;
  settings: MakePlanOptions['settings'];
  /** Only these rows of the run (`runs retry --rows`). Default: every drifted row. */
  rows?: ReadonlySet<number>;
  pageSize?: number;
  logger?: Logger;
}

export interface ReplanDriftedResult {
  /** The new plan of the drifted updates; undefined when the run had none to re-plan. */
  plan?: PlanRecord;
  /** Drifted rows of the run that were looked at. */
  drifted: number;
  /** Drifted creates (a deal matching the create exists now): not re-planned, a plan from the source decides. */
  creates: number;
  /** List requests read for the CRM's current values. */
  pages: number;
}

/**
 * `runs retry` of a plan run's drifted rows: their records changed after the plan, so they are
 * never sent as planned. Instead the CRM's current values are read (list pages in the workspace's
 * budget, as `plan` reads them) and a new plan is made of just those rows — per row the planned
 * new values against what the CRM holds now (the before-values a person reviews, and the drift
 * check holds apply to). A row whose record already holds them is `skip`; one gone from the CRM
 * `not-found`. The new plan is pending like any: review, approve, apply.
 *
 * Rows are numbered 1..n in the new plan; each keeps its source line and key. A mapping's write
 * policies are not consulted again: an `"if-empty"` field a person has filled in since shows as
 * a change over their value — which is why the new plan is reviewed before it is applied.
 */
export async function replanDrifted(options: ReplanDriftedOptions): Promise<ReplanDriftedResult> {
  const { plans, store, run } = options;
  const logger = options.logger ?? silentLogger;
  const oldId = run.options.plan;
  if (oldId === undefined)
    throw new CrmSyncError('USAGE', `run ${run.id} did not apply a plan: it has no drifted rows to re-plan`);
  const old = await plans.get(oldId);
  if (!old)
    throw new CrmSyncError(
      'PLAN_NOT_FOUND',
      `plan ${oldId}, which run ${run.id} applied, is gone (plans are removed a while after they expire); ` +
        `make a new plan for the drifted rows from the source: crm-sync plan <file> --op ${run.operation} -w ${run.workspace}`,
    );
  const wanted = new Set<number>();
  for await (const r of store.iterateResults(run.id)) {
    if (r.status === 'drifted' && (options.rows === undefined || options.rows.has(r.row))) wanted.add(r.row);
  }
  if (wanted.size === 0) return { drifted: 0, creates: 0, pages: 0 };
  const planned: PlanRow[] = [];
  let creates = 0;
  for await (const r of plans.rows(old)) {
    if (!wanted.has(r.row)) continue;
    if (r.action === 'update' && r.recordId !== undefined) planned.push(r);
    else creates++;
  }
  if (planned.length === 0) return { drifted: wanted.size, creates, pages: 0 };

  const { budget } = options;
  const index = await RecordIndex.build(options.client, {
    resource: RECONCILE_RESOURCE[old.operation],
    matchKey: 'id',
    keepPlaces: true,
    ...(options.pageSize !== undefined ? { pageSize: options.pageSize } : {}),
    ...(budget ? { beforeFetch: () => budget.take() } : {}),
  });
  const writer = await plans.begin({
    workspace: old.workspace,
    operation: old.operation,
    source: `drifted rows of run ${run.id} (plan ${old.id}, ${old.source})`,
    matchKey: old.matchKey,
    ttlMs: options.settings.planTtlMs,
  });
  const required = new Set(OPERATION_TABLE[writeOperation(old.operation)].updateRequired);
  const counts = emptyPlanCounts();
  const fields = new Set<string>();
  let n = 0;
  const reads = new ApplyReads();
  for (const r of planned) {
    const row = replanned(r, ++n, index, required);
    counts[row.action]++;
    if (row.action === 'update') reads.write(row.place);
    for (const f of Object.keys(row.fields ?? {})) fields.add(f);
    await writer.add(row);
  }
  const plan = await writer.finish({
    counts,
    rows: n,
    fields: [...fields],
    prediction: predictApply(reads, index.size, options),
  });
  logger.info({ runId: run.id, from: old.id, planId: plan.id, rows: n }, 'drifted rows re-planned');
  return { plan, drifted: wanted.size, creates, pages: index.pages };
}

/** One drifted update against the CRM's record now: the planned values it does not hold yet, over what it holds. */
function replanned(r: PlanRow, row: number, index: RecordIndex, required: ReadonlySet<string>): PlanRow {
  const place = {
    row,
    ...(r.line !== undefined ? { line: r.line } : {}),
    ...(r.ref !== undefined ? { ref: r.ref } : {}),
    recordId: r.recordId!,
    ...(r.key !== undefined ? { key: r.key } : {}),
  };
  const record = index.byId(r.recordId!);
  if (!record)
    return {
      ...place,
      action: 'not-found',
      code: 'CRM_NOT_FOUND',
      message: `record ${r.recordId} is no longer in the CRM; not sent`,
    };
  const all = r.fields ?? {};
  const before: Record<string, string | null> = {};
  for (const field of Object.keys(r.before ?? {})) {
    const now = record.values[field];
    if (now === undefined || !sameCanonical(field, now, canonicalFromRow(field, all[field])))
      before[field] = now ?? null;
  }
  if (Object.keys(before).length === 0)
    return { ...place, action: 'skip', message: 'unchanged: the CRM already holds the planned values' };
  const send = Object.fromEntries(Object.entries(all).filter(([f]) => f in before));
  // A field the API requires that the row does not change (a deal's name) goes as the CRM holds it
  // now: the old plan's value may be what a person renamed since (the drift this row ended in).
  // (A value no request can write, an empty name, stays the old plan's: the drift check holds it.)
  for (const f of required)
    if (send[f] === undefined) send[f] = rowValueFromCanonical(f, record.values[f] ?? '') ?? all[f];
  const at = index.placeOf(record.id);
  return { ...place, action: 'update', fields: send, before, ...(at !== undefined ? { place: at } : {}) };
}
