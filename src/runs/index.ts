export type * from './run-types.js';
export { newRunId } from './run-id.js';
export {
  RunStore,
  type RunStoreOptions,
  type RecordResultsOptions,
  type ProblemsQuery,
  type IterateResultsOptions,
  type RequeuedRow,
} from './run-store.js';
export {
  writeResultsCsv,
  escapeCsvCell,
  unescapeCsvCell,
  isFormulaLike,
  describeError,
  EXPORT_META_COLUMNS,
  type WriteResultsCsvOptions,
} from './results-csv.js';
