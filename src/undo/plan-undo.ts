import { OPERATION_TABLE, type CrmClient, operationEntry, runShape, updateOperationOf } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import { predictApply, type MakePlanOptions, type PlanRecord, type PlanRow, type PlanStore } from '../plans/index.js';
import type { RequestBudget } from '../rate/index.js';
import {
  emptyPlanCounts,
  isReconcileOperation,
  RECONCILE_RESOURCE,
  RecordIndex,
  rowValueFromCanonical,
  sameCanonical,
  writeOperation,
  type IndexedRecord,
  type ReconcileOperation,
} from '../reconcile/index.js';
import {
  changedSinceRunWords,
  changeValue,
  stillWriting,
  type RunNames,
  type RunRecord,
  type RunResults,
  type RunStore,
} from '../runs/index.js';
import { REFERENCE_FIELDS, ReferenceCollector, ReferenceIndex } from '../references/index.js';
import { foldWrites, type CreatedDeal, type RecordWrites } from './undo-rows.js';

export interface PlanUndoOptions {
  plans: PlanStore;
  /** Where the run's results are read: Redis, or its archive. */
  results: RunResults;
  /** Where undo runs are read (Redis): an undo of the run still writing refuses a new one. */
  runs: Pick<RunStore, 'getRun'>;
  run: RunRecord;
  client: CrmClient;
  /** The workspace's shared request budget: every list page takes a token. */
  budget?: RequestBudget;
  settings: MakePlanOptions['settings'];
  pageSize?: number;
  logger?: Logger;
}

/** A field the undo leaves as it is, and why. */
export interface LeftField {
  /** The undo plan's row, and the run's rows that wrote the field. */
  row: number;
  runRows: number[];
  recordId: string;
  field: string;
  /** What the run wrote, and what the CRM holds now (display form). */
  wrote: string;
  now?: string;
  reason: 'changed since the run' | 'value before not known' | 'empty value cannot be written' | 'record gone';
}

export interface PlanUndoResult {
  plan: PlanRecord;
  /** Fields to put back (plan updates' fields). */
  restores: number;
  /** Fields left as they are, with the CRM's value now. */
  left: LeftField[];
  /** Deals the run created: listed for removal by hand (the API has no delete). */
  created: CreatedDeal[];
  /** List requests read for the CRM's current values. */
  pages: number;
}

/**
 * `runs undo` as a plan: from the run's results (RowResult.changes, folded per record) and the
 * CRM's values now (one list pass in the budget), a pending plan whose updates write back the
 * value before the run only where the record still holds what the run wrote — the plan's
 * before-values are the run's after-values, so apply's drift check holds the undo to that too.
 * A field changed since (a person, a later run) is left: its row is `skip` "changed since the
 * run" naming the value now. Created deals are `skip` rows naming the deal. Rows are numbered
 * 1..n (plans are); each keeps the run's line, and its `ref` names the run's rows.
 */
export async function planUndo(options: PlanUndoOptions): Promise<PlanUndoResult> {
  const { run, plans } = options;
  const logger = options.logger ?? silentLogger;
  const op = undoOperation(run);
  refuseWhileWriting(run);
  // Begun before anything is read: its createdMs is when its read began, which the claim of
  // "the undo of run X" (PlanWriter.finish) holds against an undo taken for applying meanwhile.
  const writer = await plans.begin({
    workspace: run.workspace,
    operation: op,
    source: `undo of run ${run.id} (${run.source})`,
    matchKey: 'id',
    ttlMs: options.settings.planTtlMs,
    undoOf: run.id,
  });
  await refuseWhileUndoing(plans, options.runs, run);
  const creates = operationEntry(run.operation).creates;
  const { records, created } = await foldWrites(options.results.iterateResults(run.id), creates);
  const { budget } = options;
  // The names of the ids put back, as the CRM's records show them now: from the same pages.
  const collector = new ReferenceCollector(RECONCILE_RESOURCE[op]);
  // A run that updated nothing reads no list: its index is an empty one (no record, no page).
  const index =
    records.length > 0
      ? await RecordIndex.build(options.client, {
          resource: RECONCILE_RESOURCE[op],
          matchKey: 'id',
          ...(options.pageSize !== undefined ? { pageSize: options.pageSize } : {}),
          ...(budget ? { beforeFetch: () => budget.take() } : {}),
          onRecords: (page) => page.forEach((r) => collector.add(r)),
        })
      : new RecordIndex(RECONCILE_RESOURCE[op], 'id');
  const namer = undoNamer(new ReferenceIndex([collector.pass()]), await options.results.names(run.id));
  const required = OPERATION_TABLE[writeOperation(op)].updateRequired;
  const counts = emptyPlanCounts();
  const fields = new Set<string>();
  const left: LeftField[] = [];
  let restores = 0;
  let n = 0;
  for (const w of records) {
    const row = undoRow(++n, w, index.byId(w.recordId), required, left, namer);
    counts[row.action]++;
    if (row.action === 'update') restores += Object.keys(row.before ?? {}).length;
    for (const f of Object.keys(row.fields ?? {})) fields.add(f);
    await writer.add(row);
  }
  for (const c of created) {
    counts.skip++;
    await writer.add({
      row: ++n,
      line: c.row,
      ref: `row ${c.row}`,
      action: 'skip',
      recordId: c.dealId,
      message: `deal ${c.dealId} was created by row ${c.row} of run ${run.id}; the API has no delete: remove it by hand`,
    });
  }
  const plan = await writer.finish({
    counts,
    rows: n,
    fields: [...fields],
    prediction: predictApply(counts.update, index.size, options),
  });
  logger.info({ runId: run.id, planId: plan.id, rows: n, restores, left: left.length }, 'undo planned');
  return { plan, restores, left, created, pages: index.pages };
}

/**
 * An undo of a run that may still write (stillWriting) is refused (RUN_STATE, exit 2): it would
 * put back only what was written so far, and the rest would keep the run's values after it ends
 * while the run looked undone.
 */
export function refuseWhileWriting(run: RunRecord): void {
  const why = stillWriting(run);
  if (why === undefined) return;
  const ending =
    run.status === 'running' || run.status === 'blocked'
      ? `cancel it first (crm-sync runs undo ${run.id} --cancel-first cancels it, waits for its rows and then undoes; or crm-sync runs cancel ${run.id}, or the run page's Cancel), or wait for it to end (crm-sync runs show ${run.id})`
      : `undo it once they are (crm-sync runs show ${run.id})`;
  throw new CrmSyncError(
    'RUN_STATE',
    `${why}: an undo now would put back only what it wrote so far, and the rest would keep the run's values; ${ending}. Nothing was planned.`,
  );
}

/**
 * An undo of the run taken for applying whose run may still write (or is not made yet) refuses
 * a new undo (RUN_STATE): the new one's read would see its writes in part, and put back again
 * what it puts back. Checked after the new plan began: an undo taken later is the claim's to
 * refuse (PlanWriter.finish).
 */
async function refuseWhileUndoing(plans: PlanStore, runs: Pick<RunStore, 'getRun'>, run: RunRecord): Promise<void> {
  const { taken } = await plans.undoClaim(run.workspace, run.id);
  if (taken === undefined) return;
  const plan = await plans.get(taken);
  if (!plan || plan.status === 'discarded') return;
  const undoRun = plan.runId !== undefined ? await runs.getRun(plan.runId) : null;
  if (plan.runId !== undefined && (!undoRun || stillWriting(undoRun) === undefined)) return;
  const by = plan.runId !== undefined ? `run ${plan.runId} (plan ${taken})` : `plan ${taken}`;
  throw new CrmSyncError(
    'RUN_STATE',
    `run ${run.id} is being undone by ${by}: wait for it to end (crm-sync runs show ${plan.runId ?? taken}), then undo the run again if anything is left. Nothing was planned.`,
  );
}

/** The plan operation an undo of the run writes with; refused for runs that cannot be undone. */
function undoOperation(run: RunRecord): ReconcileOperation {
  // A create is undone by an update of what it made (its deal's fields back to empty).
  const update = runShape(run.operation) === 'create' ? updateOperationOf(run.operation) : undefined;
  if (update !== undefined && isReconcileOperation(update)) return update;
  if (isReconcileOperation(run.operation)) return run.operation;
  throw new CrmSyncError(
    'USAGE',
    `run ${run.id} is ${run.operation}: invitations cannot be taken back through the API; nothing was planned`,
  );
}

/** One record's undo: the fields that still hold what the run wrote, back to their values before. */
function undoRow(
  row: number,
  w: RecordWrites,
  record: IndexedRecord | undefined,
  required: readonly string[],
  left: LeftField[],
  nameOf: (field: string, id: string) => string | undefined = () => undefined,
): PlanRow {
  const place = {
    row,
    ...(w.line !== undefined ? { line: w.line } : {}),
    ref: `row ${w.rows.join(', row ')}`,
    recordId: w.recordId,
  };
  const leave = (field: string, wrote: string, reason: LeftField['reason'], now?: string) =>
    left.push({
      row,
      runRows: w.rows,
      recordId: w.recordId,
      field,
      wrote: changeValue(wrote),
      ...(now !== undefined ? { now: changeValue(now) } : {}),
      reason,
    });
  if (!record) {
    for (const [field, [, after]] of Object.entries(w.changes)) leave(field, after, 'record gone');
    return {
      ...place,
      action: 'not-found',
      code: 'CRM_NOT_FOUND',
      message: `record ${w.recordId} is no longer in the CRM; nothing put back`,
    };
  }
  const send: Record<string, unknown> = {};
  const before: Record<string, string> = {};
  const words: string[] = [];
  for (const [field, [was, after]] of Object.entries(w.changes)) {
    const now = record.values[field];
    if (was === null || now === undefined) {
      leave(field, after, 'value before not known');
      words.push(`${field}: its value before the run is not known`);
      continue;
    }
    // Back only when it holds the very text before: a run that fixed an address's case
    // ("compare": "exact") is undone to the old case. Still the run's value as the CRM compares.
    if (now === was) continue; // already back
    if (!sameCanonical(field, now, after)) {
      leave(field, after, 'changed since the run', now);
      words.push(changedSinceRunWords(field, now, after));
      continue;
    }
    const value = rowValueFromCanonical(field, was);
    if (value === undefined) {
      leave(field, after, 'empty value cannot be written', now);
      words.push(`${field} was empty before the run, and the API cannot write an empty ${field}`);
      continue;
    }
    send[field] = value;
    before[field] = after;
  }
  if (Object.keys(before).length === 0)
    return {
      ...place,
      action: 'skip',
      message:
        words.length > 0 ? `not put back: ${words.join('; ')}` : 'unchanged: already holds the values before the run',
    };
  // A deal update's required name rides along as the CRM holds it, unless it is put back itself.
  for (const f of required) if (send[f] === undefined) send[f] = rowValueFromCanonical(f, record.values[f] ?? '');
  const names = namesOfSent(send, before, nameOf);
  return {
    ...place,
    action: 'update',
    fields: send,
    before,
    ...(names !== undefined ? { names } : {}),
    ...(words.length > 0 ? { message: `put back in part: ${words.join('; ')}` } : {}),
  };
}

/**
 * Who names an id an undo puts back: the CRM's records as the undo's own pages show them now
 * (a stage, pipeline, tag or company), else the run's rows (RunStore.names: a lookup's owner,
 * a mapped value). Ids put back read `"Qualification" → stg_…` in the plan, the undo run and
 * history; the id is what is sent.
 */
function undoNamer(references: ReferenceIndex, runNames: RunNames): (field: string, id: string) => string | undefined {
  return (field, id) => {
    const kind = REFERENCE_FIELDS[field];
    return (kind !== undefined ? references.nameOf(kind, id) : undefined) ?? runNames[field]?.[id];
  };
}

/**
 * A plan row's names (PlanRow.names: field → text, a list's items joined by `; `) of the fields
 * it puts back; a list names only when every item has a name (the apply pairs them one to one).
 */
function namesOfSent(
  send: Readonly<Record<string, unknown>>,
  putBack: Readonly<Record<string, string>>,
  nameOf: (field: string, id: string) => string | undefined,
): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const field of Object.keys(putBack)) {
    const value = send[field];
    const ids = typeof value === 'string' ? [value] : Array.isArray(value) ? value.map(String) : [];
    const texts = ids.map((id) => nameOf(field, id));
    if (ids.length > 0 && texts.every((t) => t !== undefined)) out[field] = texts.join('; ');
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
