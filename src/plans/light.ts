/*
 * The plan store's light surface, for store-only commands (`plans list|show|export|approve|
 * discard`) that must not load what index.ts does besides (the producer: BullMQ; the planner).
 * Everything here is also in index.ts.
 */
export { PlanStore, PLAN_KEEP_MS, type PlanMove, type PlanRefusal } from './plan-store.js';
export { refusal } from './plan-refusal.js';
export type * from './plan-types.js';
