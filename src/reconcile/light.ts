/*
 * Reconcile's light surface: planning without sending (`crm-sync plan`, apply's prediction),
 * which must not load reconcile-import's queue side (BullMQ, the producer): ~15 MB of a plan's
 * RSS (bench/RESULTS.md, "Change control"). Everything here is also in index.ts.
 */
export { writeOperation, type ReconcileOperation } from './resource-fields.js';
export {
  BEFORE_PASS_SPACING,
  DRIFT_PAGE_READ_SHARE,
  DRIFT_PASS_SPACING,
  DRIFT_READ_AHEAD_FROM,
  pageOfPlace,
} from './drift-reads.js';
export { type PlannedRow } from './plan-rows.js';
export { unresolvedWords, type NameGroup, type PlanSummary, type UnresolvedGroup } from './plan-tally.js';
export { formatPlanCounts } from './plan-csv.js';
export {
  planReconcile,
  checkRows,
  defaultMatchKey,
  type CheckRowsOptions,
  type CheckRowsResult,
  type IndexStats,
  type ReconcileSourceOptions,
} from './plan-reconcile.js';
