import { randomBytes } from 'node:crypto';
import { countOf, tally } from '../counts/index.js';
import { ROW_FIELD, type FieldError, type IngestedRow } from '../ingest/index.js';
import { normaliseName, writeOperation } from '../reconcile/index.js';
import { produceRun, runLife, type ProducedRow, type ProducerProgress, type RunStop } from '../lifecycle/index.js';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { WorkspaceQueue } from '../queue/index.js';
import { ArchivedRuns, stillWriting, type RunRecord, type RunStore } from '../runs/index.js';
import type { PlanStore } from './plan-store.js';
import { refusal } from './plan-refusal.js';
import type { PlanRecord, PlanRow } from './plan-types.js';

export interface ApplyPlanOptions {
  plans: PlanStore;
  store: RunStore;
  queue: WorkspaceQueue;
  planId: string;
  /** The workspace's `requireApproval`: an unapproved plan is refused. */
  requireApproval: boolean;
  /** Who applies it (`cli:<user>@<host>`, `dashboard:<session>`), kept on the plan. Default: not recorded. */
  by?: string;
  /** The workspace's `rowsPerJob`. */
  rowsPerJob?: number;
  logger?: Logger;
  /** Called with the run as soon as it exists. */
  onRun?: (run: RunRecord) => void;
  /** The caller's stop (a nightly sync's maxFailures, its lock lost), with a RunStop as its reason. Default none. */
  signal?: AbortSignal;
  /**
   * The config's resultsDir: an undo of a run retention archived names its undo run in the
   * run's archive (ArchivedRuns.linkUndo). Default: only runs in Redis are linked.
   */
  resultsDir?: string;
  /**
   * Stop the run (RUN_ABORTED for the rows not yet queued) once this many of its rows matched no
   * record or several, as a reconciled sync does (`maxFailures`). Default: never.
   */
  abortAfterUnmatched?: number;
}

export interface ApplyPlanResult {
  plan: PlanRecord;
  run: RunRecord;
  progress: ProducerProgress;
}

/**
 * `crm-sync apply`: takes the plan for applying (once, atomically; refused when it is unapproved
 * where approval is required, expired, discarded or applied: PLAN_REFUSED, nothing queued), then
 * produces a run whose rows are exactly the plan's writes — no second diff. Each update carries
 * the plan's before-values of the fields it changes, so the worker sends it only while the
 * record still holds them and the values it sends unchanged (a deal's name) (else `drifted`); creates carry when the plan was made, so the worker
 * sends one only while no deal holds its match key and none like it was made since (else
 * `drifted`), then through the duplicate-safe create as an import's do. The run's life is runLife's, like every run's.
 *
 * A plan a nightly sync's tick made is applied as that sync's run (its name on the run, so the
 * next tick waits for it) and with every row of the plan: unchanged rows end `skipped`, rows that
 * matched no record or several `failed`, bad rows `invalid`, as a reconciled run records them —
 * the sync's counts, failed-rows file and maxFailures read as before.
 */
export async function applyPlan(options: ApplyPlanOptions): Promise<ApplyPlanResult> {
  const { plans, store, queue, planId } = options;
  const logger = options.logger ?? silentLogger;
  const plan = await plans.require(planId);
  if (plan.undoOf !== undefined) await refuseUndoWhileWriting(store, plan);
  const token = randomBytes(8).toString('hex');
  const move = await plans.beginApply(planId, options.requireApproval, token);
  if (!move.ok) throw refusal(plan, move);
  let runId: string | undefined;
  try {
    if (options.by !== undefined) await plans.setApplier(planId, options.by);
    const unmatched = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, unmatched.signal]) : unmatched.signal;
    const limit = options.abortAfterUnmatched;
    const tooMany =
      limit === undefined
        ? undefined
        : (n: number) => {
            if (n >= limit)
              unmatched.abort({
                kind: 'aborted',
                reason: `aborted: ${n} rows matched no record or several (maxFailures ${limit})`,
              } satisfies RunStop);
          };
    const { run, progress } = await runLife({
      store,
      logger,
      signal,
      columns: () => ['id', ...plan.fields],
      start: async () => {
        const run = await store.createRun({
          workspace: plan.workspace,
          operation: plan.operation,
          source: `plan ${plan.id} (${plan.source})`,
          ...(plan.syncName !== undefined ? { syncName: plan.syncName } : {}),
          options: {
            plan: plan.id,
            reconcile: true,
            matchKey: plan.matchKey,
            ...(plan.undoOf !== undefined ? { undoOf: plan.undoOf } : {}),
            ...(options.rowsPerJob !== undefined && options.rowsPerJob > 1 ? { rowsPerJob: options.rowsPerJob } : {}),
          },
        });
        runId = run.id;
        await plans.setRun(planId, run.id);
        if (plan.undoOf !== undefined) await linkUndo(store, options.resultsDir, plan.undoOf, run.id, logger);
        options.onRun?.(run);
        return run;
      },
      produce: (run, stop) =>
        produceRun(writesOf(plans, plan, Date.parse(run.createdAt), tooMany), {
          queue,
          store,
          runId: run.id,
          signal: stop,
          logger,
          ...(options.rowsPerJob !== undefined ? { rowsPerJob: options.rowsPerJob } : {}),
          sourceColumns: () => ['id', ...plan.fields],
        }),
    });
    await plans.applied(planId, token);
    return { plan: await plans.require(planId), run, progress };
  } catch (err) {
    // No run: nothing was queued, the plan may be applied again. With a run, rows may have gone:
    // the plan stays `applying`, naming its run (runLife failed it with the reason).
    if (runId === undefined) await plans.unapply(planId, token).catch(() => undefined);
    throw err;
  }
}

/**
 * An undo plan of a run writing again (`runs retry`, `runs resume` since the plan was made) is
 * refused: applied now it would leave that run half undone. An archived run writes no more.
 */
async function refuseUndoWhileWriting(store: RunStore, plan: PlanRecord): Promise<void> {
  const undone = await store.getRun(plan.undoOf!);
  const why = undone ? stillWriting(undone) : undefined;
  if (why !== undefined)
    throw new CrmSyncError(
      'PLAN_REFUSED',
      `${why}: undo plan ${plan.id} applied now would put back only part of what it writes; wait for it to end, then undo it again (crm-sync runs undo ${plan.undoOf}). Nothing was sent.`,
    );
}

/**
 * Names the undo run on the run it undoes: in Redis, or in its archive. A link that cannot be
 * written (an archive on another machine, a full disk) is logged, not a failure: the undo run
 * names the run it undoes either way (options.undoOf).
 */
async function linkUndo(
  store: RunStore,
  resultsDir: string | undefined,
  undoOf: string,
  undoId: string,
  logger: Logger,
): Promise<void> {
  if (await store.linkUndo(undoOf, undoId)) return;
  const words = 'the undone run does not name its undo run';
  try {
    if (resultsDir !== undefined && (await new ArchivedRuns(resultsDir).linkUndo(undoOf, undoId))) return;
    logger.warn({ runId: undoOf, undoId }, `${words}: it is neither in Redis nor archived here`);
  } catch (err) {
    logger.warn({ runId: undoOf, undoId, err: errorMessage(err) }, `${words}: its archive could not be written`);
  }
}

/**
 * The plan's writes (a sync's plan: every row), in row order, as the producer takes them;
 * `appliedAt`: the run's creation (Redis clock). Creates sharing a name with another create of
 * the plan are read first: their drift check counts only deals made before the apply
 * (PlannedWindow.until).
 */
async function* writesOf(
  plans: PlanStore,
  plan: PlanRecord,
  appliedAt: number,
  onUnmatched?: (n: number) => void,
): AsyncGenerator<ProducedRow> {
  const names = new Map<string, number>();
  for await (const r of plans.rows(plan)) if (r.action === 'create') tally(names, nameOf(r));
  // An undo says for every row why it was not put back (changed since the run, a created deal).
  const everyRow = plan.syncName !== undefined || plan.undoOf !== undefined;
  let unmatched = 0;
  for await (const r of plans.rows(plan)) {
    const twin = r.action === 'create' && countOf(names.get(nameOf(r))) > 1;
    const row = producedOf(plan, r, twin ? appliedAt : undefined) ?? (everyRow ? decidedOf(r) : undefined);
    if (!row) continue;
    if (r.action === 'not-found' || r.action === 'ambiguous') onUnmatched?.(++unmatched);
    yield row;
  }
}

/** A create's name as the CRM compares names ('' when it has none). */
function nameOf(r: PlanRow): string {
  const name = r.fields?.name;
  return typeof name === 'string' ? normaliseName(name) : '';
}

/** A row the plan does not write, with the result a reconciled run records for it. */
function decidedOf(r: PlanRow): ProducedRow {
  const place = { row: r.row, line: r.line ?? r.row, ...(r.ref !== undefined ? { ref: r.ref } : {}), original: {} };
  const message = r.message ?? r.action;
  if (r.action === 'skip')
    return {
      ...place,
      outcome: { status: 'skipped', message, ...(r.recordId !== undefined ? { recordId: r.recordId } : {}) },
    };
  if (r.action === 'invalid')
    return { ...place, code: (r.code ?? 'ROW_INVALID') as IngestedRow['code'], errors: fieldErrorsOf(message) };
  return { ...place, outcome: { status: 'failed', ...(r.code !== undefined ? { code: r.code } : {}), message } };
}

/** A stored invalid row's message (`field: problem; field: problem`) as the field errors it was made of. */
function fieldErrorsOf(message: string): FieldError[] {
  return message.split('; ').map((part) => {
    const at = part.indexOf(': ');
    return at > 0 ? { field: part.slice(0, at), message: part.slice(at + 2) } : { field: ROW_FIELD, message: part };
  });
}

function producedOf(plan: PlanRecord, r: PlanRow, until: number | undefined): ProducedRow | undefined {
  const names = sentNamesOf(r);
  const place = {
    row: r.row,
    line: r.line ?? r.row,
    ...(r.ref !== undefined ? { ref: r.ref } : {}),
    ...(names.length > 0 ? { names } : {}),
  };
  const fields = r.fields ?? {};
  if (r.action === 'update' && r.recordId !== undefined) {
    const expect = Object.fromEntries(
      Object.entries(r.before ?? {}).filter((e): e is [string, string] => e[1] !== null),
    );
    return {
      ...place,
      payload: { op: writeOperation(plan.operation), id: r.recordId, fields } as ProducedRow['payload'],
      original: originalOf({ id: r.recordId, ...fields }),
      expect,
      ...(r.place !== undefined ? { listPlace: r.place } : {}),
      ...(plan.undoOf !== undefined ? { undo: true as const } : {}),
    };
  }
  if (r.action === 'create')
    return {
      ...place,
      payload: {
        op: 'deal.create',
        fields,
        ...(r.match !== undefined ? { match: r.match } : {}),
      } as ProducedRow['payload'],
      original: originalOf(fields),
      planned: { madeAt: Date.parse(plan.createdAt), ...(until !== undefined ? { until } : {}) },
    };
  return undefined;
}

/**
 * The names a plan row kept (PlanRow.names: field → the cell's text, a list's items joined by
 * `; `) paired with the ids it sends, for the run's names (RunStore.addNames). A list whose
 * items do not pair one to one (an item given as an id has no name) names nothing: never a
 * name beside the wrong id.
 */
function sentNamesOf(r: PlanRow): NonNullable<ProducedRow['names']> {
  const out: NonNullable<ProducedRow['names']> = [];
  // The plan keeps no column label: the field names itself (labels are for summaries, not runs).
  for (const [field, text] of Object.entries(r.names ?? {})) {
    const value = r.fields?.[field];
    if (typeof value === 'string') out.push({ field, label: field, id: value, text });
    else if (Array.isArray(value)) {
      const texts = text.split('; ');
      if (texts.length === value.length)
        value.forEach((id, i) => typeof id === 'string' && out.push({ field, label: field, id, text: texts[i]! }));
    }
  }
  return out;
}

/** A row's values as text, as a source would give them (exports of failed rows show them). */
function originalOf(values: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => [
      k,
      typeof v === 'string'
        ? v
        : Array.isArray(v)
          ? v.join(';')
          : v === null || v === undefined
            ? ''
            : JSON.stringify(v),
    ]),
  );
}
