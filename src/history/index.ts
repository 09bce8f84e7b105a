export { recordHistory, type HistoryEntry, type RecordHistoryOptions } from './record-history.js';
export { PgHistory, type PgHistoryOptions, type PgHistoryStats } from './pg-history.js';
export { historyOf, type HistoryOfOptions } from './history-of.js';
