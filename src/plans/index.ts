export {
  PlanStore,
  PlanWriter,
  PLAN_KEEP_MS,
  type NewPlan,
  type PlanMove,
  type PlanRefusal,
  type UndoClaim,
} from './plan-store.js';
export { makePlan, planRowOf, type MakePlanOptions, type MakePlanResult } from './make-plan.js';
export { predictApply } from './apply-prediction.js';
export { applyPlan, type ApplyPlanOptions, type ApplyPlanResult } from './apply-plan.js';
export { refusal, undoWords } from './plan-refusal.js';
export { encodePlanRow, decodePlanRow } from './plan-codec.js';
export {
  afterCell,
  afterWords,
  planChanges,
  planRowFilter,
  writePlanCsv,
  PLAN_EXPORT_COLUMNS,
  type PlanRowFilter,
} from './plan-view.js';
export {
  PLAN_STATUSES,
  type PlanAction,
  type PlanApproval,
  type PlanChange,
  type PlanCounts,
  type PlanPrediction,
  type PlanRecord,
  type PlanRow,
  type PlanStatus,
} from './plan-types.js';
export { replanDrifted, type ReplanDriftedOptions, type ReplanDriftedResult } from './replan-drifted.js';
export { heldPlanWords, planState, type PlanState } from './held-plan.js';
