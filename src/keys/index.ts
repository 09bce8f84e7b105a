export {
  authFailuresNamespace,
  bullPrefix,
  generationKey,
  housekeepingLockKey,
  metricsKey,
  poolsKey,
  probeKey,
  requestBudgetKey,
  runSeriesKey,
  seriesKey,
  sessionKey,
  sessionKeyBase,
  syncLockKey,
  uploadAnswerKey,
  workBoardKey,
} from './key-layout.js';
export { RunKeys, RUN_STATUSES, RESULT_BUCKET_ROWS } from './run-keys.js';
