/*
 * The CRM module's light surface: the operation table's names and types, which command
 * declarations and the run codec read without loading got or zod. Everything here is also in
 * index.ts.
 */
export {
  OPERATIONS,
  RECONCILE_OPERATIONS,
  RUN_OPERATIONS,
  type Operation,
  type ReconcileOperation,
  type RunOperation,
} from './operation-table.js';
