/**
 * crm-sync as a library: the same parts the CLI uses, for a program that embeds the import.
 * The CLI (bin/crm-sync.js) only parses arguments and calls these. See docs/library.md ("Use it as a
 * library") for an example, and docs/architecture.md ("Modules") for what each part does.
 */

// Configuration: the file's schema (zod; its JSON Schema ships as schema/crm-sync.config.schema.json).
export {
  loadConfig,
  configFromObject,
  getWorkspace,
  ConfigFileSchema,
  DEFAULT_CONFIG_FILE,
  DEFAULT_REDIS_URL,
  DEFAULTS,
  type Config,
  type ConfigFile,
  type WorkspaceConfig,
  type LoadConfigOptions,
} from './config/index.js';

// Connections: one Redis connection, the run store and the workspaces' queues.
export { openRuntime, createCrmClient, type Runtime } from './runtime/index.js';

// Work: queue a file's rows, process queues, compare with the CRM first, follow a run.
export {
  importFile,
  retryRun,
  retryRows,
  resumeProducer,
  followRun,
  type FollowRunOptions,
  type ImportFileOptions,
  type RetryRunOptions,
  type RetryRowsOptions,
  type RetrySummary,
  type ResumeProducerOptions,
} from './lifecycle/index.js';
export { startWorkerPool, type WorkerPool, type WorkerPoolOptions } from './worker/index.js';
export {
  reconcileImport,
  planReconcile,
  verifyRun,
  type ReconcileImportOptions,
  type ReconcileImportResult,
  type PlanReconcileOptions,
  type PlanResult,
  type VerifyRunOptions,
  type VerifyResult,
} from './reconcile/index.js';

// Results: every input row ends with exactly one result (docs/architecture.md, "Result model").
export {
  RunStore,
  writeResultsCsv,
  type RunRecord,
  type RunCounts,
  type RunStatus,
  type RowResult,
  type FinalRowStatus,
  type WriteResultsCsvOptions,
} from './runs/index.js';

// Errors: CrmSyncError's `code` is stable (ERROR_CODES); CRM answers map to the CrmError family.
export { CrmSyncError, isCrmSyncError, errorMessage, ERROR_CODES, type ErrorCode } from './errors/index.js';
export {
  CrmError,
  AuthError,
  RateLimitedError,
  TransientError,
  NotFoundError,
  RejectedError,
  BadResponseError,
  OPERATIONS,
  type Operation,
} from './crm/index.js';

// Logging and tracing.
export { createLogger, silentLogger, type Logger, type LoggerOptions } from './log/index.js';
export { startTelemetry, type StartTelemetryOptions, type Telemetry } from './telemetry/index.js';

// The CRM simulator, for a program's own tests and demos.
export { startSimulator, type Simulator } from './sim/index.js';
