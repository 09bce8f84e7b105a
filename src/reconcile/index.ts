export {
  RECONCILE_OPERATIONS,
  RECONCILE_RESOURCE,
  COMPARABLE_FIELDS,
  MATCH_KEYS,
  DEFAULT_MATCH_KEY,
  isReconcileOperation,
  checkMatchKey,
  normaliseKey,
  writeOperation,
  type ReconcileOperation,
} from './resource-fields.js';
export {
  diffFields,
  sameCanonical,
  canonicalFromRow,
  showCanonical,
  normaliseName,
  canonicalFromRecord,
  rowValueFromCanonical,
  type FieldChange,
  type IndexedRecord,
} from './compare.js';
export { RecordIndex, type BuildIndexOptions } from './record-index.js';
export {
  BEFORE_PASS_SPACING,
  DRIFT_PAGE_READ_SHARE,
  DRIFT_PASS_SPACING,
  DRIFT_READ_AHEAD_FROM,
  pageOfPlace,
} from './drift-reads.js';
export {
  planRows,
  checkRow,
  RowPlanner,
  keyColumnOf,
  heldWords,
  PLAN_ACTIONS,
  type PlanAction,
  type PlannedRow,
  type PlanRowsOptions,
  type RowCheck,
} from './plan-rows.js';
export { applyWritePolicies, type HeldField, type PolicyOutcome } from './write-policy.js';
export {
  PlanTally,
  topFields,
  unresolvedWords,
  type FieldTally,
  type NameGroup,
  type PlanSummary,
  type UnresolvedGroup,
} from './plan-tally.js';
export { PLAN_CSV_COLUMNS, emptyPlanCounts, formatPlanCounts, type PlanCounts } from './plan-csv.js';
export {
  planReconcile,
  checkRows,
  buildIndexFor,
  defaultMatchKey,
  type ReconcileSourceOptions,
  type PlanReconcileOptions,
  type PlanResult,
  type IndexStats,
  type CheckRowsOptions,
  type CheckRowsResult,
  type SourceCheckOptions,
} from './plan-reconcile.js';
export { reconcileImport, type ReconcileImportOptions, type ReconcileImportResult } from './reconcile-import.js';
export { fieldChanges } from './field-changes.js';
export { sentDigest, checkDigest, digestHolds, type DigestCheck } from './sent-digest.js';
export { verifyRun, VERIFY_CSV_COLUMNS, type VerifyRunOptions, type VerifyResult } from './verify-run.js';
