export { recordHistory, type HistoryEntry, type RecordHistoryOptions } from './record-history.js';
export { changesOf, PgHistory, type HistoryChange, type PgHistoryOptions, type PgHistoryStats } from './pg-history.js';
export { historyOf, historyReport, type HistoryOfOptions, type HistoryReport } from './history-of.js';
export { HistoryMarks, type HistoryGap, type RunMark } from './history-marks.js';
export {
  catchUpBeforeRemoval,
  catchUpRun,
  catchUpWorkspace,
  owedRuns,
  removalCatchUp,
  startHistoryCatchUp,
  type CatchUpOptions,
  type OwedRun,
} from './history-catch-up.js';
export { pgTableName, HISTORY_TABLE_NAME } from './pg-table.js';
