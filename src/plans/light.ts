/*
 * The plans module's light surface: making and storing a plan (`crm-sync plan`) without the
 * apply side (apply-plan.ts loads the producer and the queue). Everything here is also in index.ts.
 */
export { PlanStore } from './plan-store.js';
export { makePlan } from './make-plan.js';
export type { PlanRecord } from './plan-types.js';
