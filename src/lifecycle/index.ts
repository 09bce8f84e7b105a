export {
  produceRun,
  type ProducerOptions,
  type ProducerProgress,
  type ProducedRow,
  type RowOutcome,
} from './producer.js';
export { importFile, sourceIdentity, type ImportFileOptions } from './import-file.js';
export { resumeProducer, type ResumeProducerOptions } from './resume-producer.js';
export { produceSource, sourceRunOptions, type ProduceSourceOptions } from './produce-source.js';
export { runLife, finishRun, type RunLifeOptions, type WhenProducingFails } from './run-life.js';
export {
  cancelRun,
  stopRun,
  stoppedResult,
  stopOf,
  type RunStop,
  type CancelRunOptions,
  type CancelSummary,
} from './stop-run.js';
export { checkImportApproval, checkRetryApproval, planCommands } from './approval-rule.js';
export { retryRows, retrySettings, type RetryRowsOptions, type RetrySettings } from './retry-rows.js';
export { retryRun, writtenLaterWords, type IgnoredLine, type RetryRunOptions, type RetrySummary } from './retry-run.js';
export {
  followRun,
  settledRun,
  SETTLE_WAIT_MS,
  DEFAULT_REDIS_OUTAGE_MS,
  type FollowRunOptions,
  type WaitWatch,
  type RedisWaitWatch,
} from './follow-run.js';
export { RunGoneError, runGoneWords, type GoneCause, type RunGoneFacts } from './run-gone.js';
export {
  PRODUCER_HEARTBEAT_MS,
  PRODUCER_SILENCE_MS,
  producerIdentity,
  exitedProducer,
  producerGone,
} from './producer-heartbeat.js';
