export {
  watchRedisGeneration,
  currentGeneration,
  redisLostDataSince,
  type RedisGenerationWatch,
} from './redis-generation.js';
export { readEviction, evicts, isEvictionReason, EVICTION_TAG, type EvictionState } from './redis-eviction.js';
export {
  connectRedis,
  refuseEvictingRedis,
  refuseRedisCluster,
  redactRedisUrl,
  redisOptions,
  watchRedisLiveness,
  redisLiveness,
  DEFAULT_COMMAND_TIMEOUT_MS,
  BULLMQ_MAX_BLOCK_MS,
  type RedisRole,
  type ConnectRedisOptions,
  type RedisLiveness,
  type RedisLivenessOptions,
} from './redis-connection.js';
export { connectConfiguredRedis, describeRedisTarget } from './cluster-connection.js';
export { queueName, rowJobId, workspaceOfQueue } from './queue-names.js';
export {
  SharedTokenBucket,
  workspaceRequestBudget,
  type RequestBudget,
  type SharedTokenBucketOptions,
} from './token-bucket.js';
export {
  isInviteBatch,
  toJobData,
  type LegacyRowJobData,
  type StoredJobData,
  type QueuedRow,
  type RowBatchJobData,
  type RowPayload,
  type InviteBatchJobData,
  type InviteRow,
  type SyncJobData,
  type SyncJobName,
} from './job-data.js';
export {
  openWorkspaceQueue,
  pendingJobCount,
  type WorkspaceQueue,
  type WorkspaceQueueOptions,
} from './workspace-queue.js';
export {
  produceRun,
  type ProducerOptions,
  type ProducerProgress,
  type ProducedRow,
  type RowOutcome,
} from './producer.js';
export {
  blockWorkspace,
  resumeWorkspace,
  pauseWorkspace,
  pausedWords,
  DEFAULT_PAUSE_REASON,
  unpauseWorkspace,
  holdUnreachable,
  liftUnreachable,
  workspaceStatus,
  type WorkspaceStatus,
} from './workspace-control.js';
export { WorkBoard, type WorkBoardOptions } from './work-board.js';
export { PoolPresence, workerCount, type PoolAnnouncement, type PoolPresenceOptions } from './pool-presence.js';
export { whyRowsWait, type WaitReason } from './why-waiting.js';
export { importFile, sourceIdentity, type ImportFileOptions } from './import-file.js';
export { resumeProducer, type ResumeProducerOptions } from './resume-producer.js';
export {
  rideOutRedis,
  isRedisUnavailable,
  isRedisFull,
  DEFAULT_PRODUCER_OUTAGE_MS,
  type RideOutOptions,
} from './ride-out-redis.js';
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
export { retryRun, writtenLaterWords, type IgnoredLine, type RetryRunOptions, type RetrySummary } from './retry-run.js';
export {
  PRODUCER_HEARTBEAT_MS,
  PRODUCER_SILENCE_MS,
  producerIdentity,
  exitedProducer,
  producerGone,
} from './producer-heartbeat.js';
