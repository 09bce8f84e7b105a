export { connectRedis, redactRedisUrl, redisOptions, type RedisRole, type ConnectRedisOptions } from './redis-connection.js';
export { bullPrefix, queueName, rowJobId } from './queue-names.js';
export { isInviteBatch, type RowJobData, type InviteBatchJobData, type InviteRow, type SyncJobData, type SyncJobName } from './job-data.js';
export { openWorkspaceQueue, pendingJobCount, type WorkspaceQueue, type WorkspaceQueueOptions } from './workspace-queue.js';
export { produceRun, type ProducerOptions, type ProducerProgress, type ProducedRow, type RowOutcome } from './producer.js';
export { blockWorkspace, resumeWorkspace } from './workspace-control.js';
export { importFile, type ImportFileOptions } from './import-file.js';
export { produceSource, sourceRunOptions, type ProduceSourceOptions } from './produce-source.js';
export { retryRun, type RetryRunOptions, type RetrySummary } from './retry-run.js';
