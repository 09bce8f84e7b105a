export { recordHistory, type HistoryEntry, type RecordHistoryOptions } from './record-history.js';
