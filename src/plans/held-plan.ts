import type { PlanRecord, PlanStatus } from './plan-types.js';

/** A plan's state as people read it: its stored status, or `expired` (pending or approved, past its expiry). */
export type PlanState = PlanStatus | 'expired';

export function planState(plan: PlanRecord): PlanState {
  return plan.expired ? 'expired' : plan.status;
}

/**
 * What became of the plan a held sync tick waits on, in words for `runs show` and the dashboard:
 * the tick's run keeps the reason of the moment it was held ("awaiting approval"), so whoever
 * shows it reads the plan as it is now. `null`: the plan is gone from Redis (it expired and was
 * removed).
 */
export function heldPlanWords(planId: string, plan: PlanRecord | null): { state: PlanState | 'gone'; words: string } {
  if (plan === null)
    return { state: 'gone', words: `plan ${planId} is gone (expired and removed): nothing of it was sent` };
  const state = planState(plan);
  const run = plan.runId !== undefined ? ` as run ${plan.runId}` : '';
  switch (state) {
    case 'pending':
      return { state, words: `plan ${planId} awaits approval: nothing sent yet` };
    case 'approved':
      return { state, words: `plan ${planId} is approved and waits to be applied: nothing sent yet` };
    case 'applying':
      return { state, words: `plan ${planId} is being applied${run}` };
    case 'applied':
      return { state, words: `plan ${planId} was applied${run}` };
    case 'discarded':
      return {
        state,
        words: `plan ${planId} was discarded${plan.reason ? ` (${plan.reason})` : ''}: nothing of it was sent`,
      };
    case 'expired':
      return { state, words: `plan ${planId} expired before it was applied: nothing of it was sent` };
  }
}
