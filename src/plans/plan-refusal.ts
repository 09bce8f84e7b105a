import { CrmSyncError } from '../errors/index.js';
import type { PlanMove } from './plan-store.js';
import type { PlanRecord } from './plan-types.js';

/** Why a plan cannot be applied, in words: PLAN_REFUSED (exit 2), nothing was sent. */
export function refusal(plan: PlanRecord, move: Extract<PlanMove, { ok: false }>): CrmSyncError {
  const id = plan.id;
  const why: Record<string, string> = {
    unapproved: `plan ${id} is not approved, and workspace "${plan.workspace}" requires approval ("requireApproval": true); approve it with: crm-sync plans approve ${id}`,
    expired: `plan ${id} expired at ${plan.expiresAt}; make a new plan (crm-sync plan …)`,
    discarded: `plan ${id} was discarded; make a new plan (crm-sync plan …)`,
    applied: `plan ${id} was already applied${plan.runId ? ` by run ${plan.runId} (crm-sync runs show ${plan.runId})` : ''}; a plan is applied once`,
    applying: `plan ${id} is already being applied${plan.runId ? ` by run ${plan.runId} (crm-sync runs show ${plan.runId})` : ''}; a plan is applied once`,
    ...undoWords(plan, move.other),
  };
  return new CrmSyncError(
    'PLAN_REFUSED',
    `${why[move.why] ?? `plan ${id} cannot be applied (${move.why})`}. Nothing was sent.`,
  );
}

/**
 * Why an undo plan cannot move (`superseded`, `undone`), in words: it would write over another
 * undo of the same run. Empty for other plans.
 */
export function undoWords(plan: PlanRecord, other: string | undefined): Record<string, string> {
  if (plan.undoOf === undefined) return {};
  const run = plan.undoOf;
  const that = other !== undefined ? `plan ${other} (crm-sync plans show ${other})` : 'another plan';
  return {
    superseded: `plan ${plan.id} was superseded by a newer undo of run ${run}, ${that}: review and apply that one`,
    undone: `run ${run} was undone since plan ${plan.id} was made, by ${that}: this plan's values are from before; undo the run again to see what is left (crm-sync runs undo ${run} --plan)`,
  };
}
