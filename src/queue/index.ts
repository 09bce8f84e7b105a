export { queueName, rowJobId, workspaceOfQueue } from './queue-names.js';
export {
  FIRST_ROUND,
  isInviteBatch,
  roundOf,
  toJobData,
  type LegacyRowJobData,
  type StoredJobData,
  type QueuedRow,
  type PlannedWindow,
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
