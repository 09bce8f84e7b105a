export type * from './run-types.js';
export { FINAL_ROW_STATUSES, emptyCounts } from './run-types.js';
export { skippedWords, plural } from './count-words.js';
export { newRunId } from './run-id.js';
export { stillWriting } from './still-writing.js';
export {
  RunStore,
  type RunStoreOptions,
  type RecordResultsOptions,
  type ProblemsQuery,
  type IterateResultsOptions,
  type RequeuedRow,
  type WriterFence,
  type OrderSettlement,
  type RefusalReason,
  type RecordOutcome,
  HOLD_KINDS,
  type HoldKind,
  type WorkspaceHold,
} from './run-store.js';
export {
  RowFence,
  seqOf,
  resendPlace,
  seqInWords,
  runOfSeq,
  wouldBeSuperseded,
  type RowFenceOptions,
  type RowWriter,
  type RecordRef,
  type BeginUpdate,
  type WrittenLater,
  type BeginCreate,
  type CreateMarker,
  type FinishCreate,
  type RecordClock,
  earliestStamp,
  createMarkerTtlMs,
} from './row-fence.js';
export { RECORD_CLOCK_DRIFT, RECORD_STAMP_SPREAD_MS } from './fence-scripts.js';
export {
  writeResultsCsv,
  escapeCsvCell,
  unescapeCsvCell,
  isFormulaLike,
  describeError,
  EXPORT_META_COLUMNS,
  EXPORT_KEY_COLUMN,
  exportMetaColumns,
  isExportMetaColumn,
  type WriteResultsCsvOptions,
} from './results-csv.js';
export { RUN_STATUSES } from '../keys/index.js';
export {
  LookupPassBoard,
  MAX_SHARED_SNAPSHOT_BYTES,
  type LookupPassBoardOptions,
  type PassSnapshotMeta,
  type PassTurn,
} from './lookup-pass-board.js';
export {
  groupProblems,
  problemGroupOf,
  problemRowsWhere,
  normaliseMessage,
  type ProblemGroup,
  type ProblemGroups,
  type ProblemStatus,
  type GroupProblemsOptions,
} from './problem-groups.js';
export { searchRuns, runMatches, type ListRuns, type SearchRunsQuery, type SearchRunsResult } from './run-search.js';
export {
  succeeded,
  skipped,
  invalid,
  failed,
  cancelled,
  aborted,
  superseded,
  drifted,
  writtenLater,
  uncertain,
  placeOf,
  type RowPlace,
  type FailureDetail,
} from './row-results.js';
export { isProblem } from './result-codec.js';
export { placeWords, sourceName } from './source-words.js';
export {
  changeWords,
  changeCells,
  changeValue,
  changedSinceRunWords,
  nameWords,
  namedValueWords,
  namedOrUndefined,
  CHANGED_SINCE_RUN,
} from './change-words.js';
export { newNames, runNamesOf, type RunNames, type SentName } from './run-names.js';
export { archiveRun, archivePath, archiveDir, ArchivedRuns, runNotFoundHere, type RunResults } from './run-archive.js';
export { runDurations, durationParts, durationWords, formatDuration, type RunDurations } from './run-durations.js';
export { pruneRuns, parseDuration, type PruneOptions, type PruneSummary } from './retention.js';
export { runReads, runWhenDone, type RunReadsOptions } from './run-follower.js';
