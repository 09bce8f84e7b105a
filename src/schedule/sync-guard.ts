import { topFields, type PlanCounts, type PlanSummary } from '../reconcile/index.js';
import type { SyncDefinition } from './sync-definition.js';

/** How many fields a hold names in its alert, per list. */
const TOP_FIELDS = 5;

/** A field and the rows a plan changes (or empties, or holds back) it in. */
export interface FieldRows {
  field: string;
  rows: number;
}

/**
 * Why a tick was not applied, and what its plan would have done: the `held` part of a sync's
 * summary (the notify URL's JSON and the log), enough to decide without opening the plan.
 */
export interface SyncHold {
  /** Each limit that was passed, in words (or that the sync asks approval for every tick). */
  reasons: string[];
  /** Rows the plan read from the source. */
  rows: number;
  counts: PlanCounts;
  /** Rows that would write (updates and creates), and their share of `rows`. */
  changedRows: number;
  changedShare: number;
  /** Rows that would empty a field. */
  clearedRows: number;
  /** The fields changed in most rows, most first. */
  topChanged: FieldRows[];
  /** The fields emptied in most rows, most first. */
  topCleared: FieldRows[];
  /** The fields a mapping's write policy held back in most rows. */
  topHeldBack: FieldRows[];
  /** The plan as a CSV (one line per row, with before → after and held-back fields), when it could be written. */
  planFile?: string;
}

const share = (n: number, of: number) => (of === 0 ? 0 : n / of);
const percent = (x: number) => `${Math.round(x * 1000) / 10} %`;
const rowsOf = (tally: Record<string, number>): FieldRows[] =>
  topFields(tally, TOP_FIELDS).map(([field, rows]) => ({ field, rows }));
const named = (list: FieldRows[]) => list.map((f) => `${f.field} ${f.rows}`).join(', ');

/** Does this sync plan before it sends? Only when something could hold the tick (a dry run sends nothing anyway). */
export function guardsTicks(def: Pick<SyncDefinition, 'guard' | 'approval' | 'options'>): boolean {
  return !def.options.dryRun && (def.guard !== undefined || def.approval === 'always');
}

/**
 * Judges a tick's plan against the sync's guard: undefined when it may be applied, else the
 * hold (reasons in words, counts, the top fields changed and cleared). A limit is passed when
 * the plan goes over it: `maxCleared: 50` lets 50 rows empty a field, not 51.
 */
export function judgeGuard(def: Pick<SyncDefinition, 'guard' | 'approval'>, plan: PlanSummary): SyncHold | undefined {
  const changedShare = share(plan.changedRows, plan.rows);
  const topChanged = rowsOf(plan.changed);
  const topCleared = rowsOf(plan.cleared);
  const reasons: string[] = [];
  const { guard } = def;
  if (guard?.maxChangedShare !== undefined && changedShare > guard.maxChangedShare) {
    reasons.push(
      `${plan.changedRows} of ${plan.rows} rows would change (${percent(changedShare)}), over maxChangedShare ` +
        `${guard.maxChangedShare} (${percent(guard.maxChangedShare)})${topChanged.length > 0 ? `; most changed: ${named(topChanged)}` : ''}`,
    );
  }
  if (guard?.maxCleared !== undefined && plan.clearedRows > guard.maxCleared) {
    reasons.push(
      `${plan.clearedRows} rows would empty a field, over maxCleared ${guard.maxCleared}; emptied: ${named(topCleared)}`,
    );
  }
  if (def.approval === 'always') reasons.push('the sync asks for approval of every tick ("approval": "always")');
  if (reasons.length === 0) return undefined;
  return {
    reasons,
    rows: plan.rows,
    counts: plan.counts,
    changedRows: plan.changedRows,
    changedShare,
    clearedRows: plan.clearedRows,
    topChanged,
    topCleared,
    topHeldBack: rowsOf(plan.held),
  };
}

/** The run's reason for a held tick: what was passed, that nothing was sent, and where the plan is. */
export function holdReason(hold: SyncHold): string {
  return (
    `held: ${hold.reasons.join('; ')}. Nothing was sent.` +
    (hold.planFile !== undefined ? ` The plan is in ${hold.planFile}.` : '') +
    ' Fix the source and let the next tick plan again, or apply this one as it is now: crm-sync schedule run <sync> --override-guard.'
  );
}
