/*
 * The CRM module's light surface: the operation table's names and types, and which error codes
 * are final for a row, which command declarations, the run codec and the problem groups read
 * without loading got or zod. Everything here is also in index.ts.
 */
export {
  OPERATIONS,
  RECONCILE_OPERATIONS,
  RUN_OPERATIONS,
  type Operation,
  type ReconcileOperation,
  isRunOnly,
  runShape,
  syncOf,
  updateOperationOf,
  type RunShape,
  type RunOperation,
} from './operation-table.js';
// A stored result's code read as the worker reads its error (errors.ts imports zod's types only).
export { isPermanentCode } from './errors.js';
