export {
  SyncDefinitionSchema,
  SYNC_NAME,
  loadDefinitionFile,
  loadDefinitions,
  findDefinition,
  resolveSource,
  resolvePath,
  openSyncSource,
  sourceText,
  PostgresSourceSchema,
  SyncGuardSchema,
  type SyncGuard,
  type SyncDefinition,
  type SyncDefinitionInput,
} from './sync-definition.js';
export {
  SYNC_QUEUE,
  SYNC_JOB_NAME,
  openSyncQueue,
  installSchedule,
  listSchedules,
  removeSchedule,
  syncSchedules,
  type SyncQueue,
  type SyncTickData,
  type InstalledSchedule,
} from './sync-queue.js';
export { runSync, type RunSyncOptions, type SyncSummary } from './run-sync.js';
export { abortRun } from './abort-run.js';
export { SyncLock } from './sync-lock.js';
export { startSyncScheduler, type SyncScheduler, type SyncSchedulerOptions } from './sync-scheduler.js';
export {
  judgeGuard,
  guardsTicks,
  holdReason,
  planCommands,
  type SyncHold,
  type FieldRows,
  type PlanCommands,
} from './sync-guard.js';
