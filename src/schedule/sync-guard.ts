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
  /** The stored plan awaiting approval (`crm-sync plans show|approve|discard <id>`, `crm-sync apply <id>`). */
  planId?: string;
  /** What an operator runs to review, approve and apply, or discard the plan. */
  commands?: PlanCommands;
  /** An earlier plan of this sync that still waited, discarded by this tick. */
  supersededPlan?: string;
}

/** The commands that settle a held tick's plan, as an operator types them. */
export interface PlanCommands {
  review: string;
  approve: string;
  apply: string;
  discard: string;
}

export function planCommands(planId: string): PlanCommands {
  return {
    review: `crm-sync plans show ${planId}`,
    approve: `crm-sync plans approve ${planId}`,
    apply: `crm-sync apply ${planId} --wait`,
    discard: `crm-sync plans discard ${planId}`,
  };
}

const share = (n: number, of: number) => (of === 0 ? 0 : n / of);
const percent = (x: number) => `${Math.round(x * 1000) / 10} %`;
const rowsOf = (tally: Record<string, number>): FieldRows[] =>
  topFields(tally, TOP_FIELDS).map(([field, rows]) => ({ field, rows }));
const named = (list: FieldRows[]) => list.map((f) => `${f.field} ${f.rows}`).join(', ');

/**
 * Does this sync plan before it sends? Only when something could hold the tick: its guard,
 * `"approval": "always"`, or a workspace that requires approval of every plan (a dry run sends
 * nothing anyway).
 */
export function guardsTicks(
  def: Pick<SyncDefinition, 'guard' | 'approval' | 'options'>,
  requireApproval: boolean,
): boolean {
  return !def.options.dryRun && (def.guard !== undefined || def.approval === 'always' || requireApproval);
}

/**
 * Judges a tick's plan against the sync's guard: undefined when it may be applied, else the
 * hold (reasons in words, counts, the top fields changed and cleared). A limit is passed when
 * the plan goes over it: `maxCleared: 50` lets 50 rows empty a field, not 51.
 */
export function judgeGuard(
  def: Pick<SyncDefinition, 'guard' | 'approval' | 'workspace'>,
  plan: PlanSummary,
  requireApproval: boolean,
): SyncHold | undefined {
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
  if (requireApproval)
    reasons.push(`workspace "${def.workspace}" requires approval of every plan ("requireApproval": true)`);
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

/**
 * The run's reason for a held tick (and the plan's): the plan it is held as, what was passed,
 * that nothing was sent, and the commands that apply or discard it.
 */
export function holdReason(hold: SyncHold): string {
  const what = `${hold.reasons.join('; ')}. Nothing was sent.`;
  const earlier =
    hold.supersededPlan !== undefined
      ? ` The earlier plan ${hold.supersededPlan} of this sync, still waiting, was discarded: this tick's plan replaces it.`
      : '';
  if (hold.planId === undefined || hold.commands === undefined)
    return `held: ${what}${hold.planFile !== undefined ? ` The plan is in ${hold.planFile}.` : ''}${earlier}`;
  const c = hold.commands;
  return (
    `held as plan ${hold.planId} awaiting approval: ${what}` +
    ` Review it: ${c.review} (or the dashboard's plan page /plans/${hold.planId})` +
    `${hold.planFile !== undefined ? `; as CSV: ${hold.planFile}` : ''}.` +
    ` Approve and apply it: ${c.approve}, then ${c.apply}; or discard it: ${c.discard}` +
    ` (the next tick discards it too, with a plan of its own).${earlier}`
  );
}
