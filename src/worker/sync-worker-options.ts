import type { CrmClient } from '../crm/index.js';
import type { Logger } from '../log/index.js';
import type { MetricsRecorder } from '../metrics/index.js';
import type { RedisClient } from '../redis/index.js';
import type { RowResult, RunStore } from '../runs/index.js';

/**
 * A workspace's worker, every setting resolved: the pool resolves its own options once
 * (startWorkerPool) and the roster adds the workspace's config, so nothing here has a default.
 */
export interface SyncWorkerOptions {
  workspace: string;
  client: CrmClient;
  store: RunStore;
  /** A connection made with role `worker` (waits through Redis restarts). */
  connection: RedisClient;
  /** Key prefix from the config. */
  prefix: string;
  /**
   * The key's known rate limit, enforced for all worker processes together through Redis: every
   * request takes a token from the workspace's shared bucket. Absent: the bucket's rate is
   * learned from 429s, shared by the workspace's processes and remembered between runs.
   */
  rateLimit?: { max: number; durationMs: number };
  /** Jobs in flight in this process. */
  concurrency: number;
  /** Starts of one job, counting 429 requeues, before it fails for good. */
  maxStartedAttempts: number;
  /** Job lock; a crashed worker's jobs return to the queue after it (ms). */
  lockDurationMs: number;
  /** How often to look for jobs of crashed workers. Absent: lockDurationMs. */
  stalledIntervalMs?: number;
  /** Graceful close waits this long for in-flight requests, then gives up on them (ms). */
  closeTimeoutMs: number;
  /** The workspace's transient-retry policy, for jobs this worker adds (invite halves). */
  retry: { attempts: number; backoffMs: number };
  /** How often jobs BullMQ failed by itself are checked for a missing row result (ms). */
  sweepIntervalMs: number;
  /** A run whose producer was silent this long is failed (its process died mid-file; ms). */
  producerSilenceMs: number;
  /** Wait before looking for the deal of a create whose answer was lost (ms). */
  createSettleMs: number;
  /** Apply's drift check reads the list again once its last read is this old (the workspace's `driftMaxAgeMs`; ms). */
  driftMaxAgeMs: number;
  /** A plain import's update reads its before-values from list pages (the workspace's `readBefore`). Default true. */
  readBefore?: boolean;
  /** Before-values come from a list pass at most this old (the workspace's `beforeMaxAgeMs`; ms). Default DEFAULTS.workspace.beforeMaxAgeMs. */
  beforeMaxAgeMs?: number;
  /** The config's retention (ms): create markers and deal claims live as long as a run can be retried. */
  retentionMs: number;
  /** Deal fields the CRM's automation may set on a new deal: a look-up does not compare them. */
  automationFields: readonly string[];
  /**
   * How long a write may be on the wire before it counts as applied (derivedSettings' writeLeaseMs
   * of the workspace's request timeout).
   */
  writeLeaseMs: number;
  /**
   * Circuit breaker (docs/architecture.md, "Circuit breaker"): unreachable failures in a row
   * that hold the workspace, and how often a held workspace is probed (ms).
   */
  breaker: { threshold: number; probeEveryMs: number };
  /** The CRM failing this long with no success is one warning with counts (ms). */
  outageWarningMs: number;
  logger: Logger;
  /** Fleet-wide counters for the dashboard's /metrics. */
  metrics: MetricsRecorder;
  /** The process's PostgreSQL history writer (config `history`); absent: none. */
  history?: HistorySink;
}

/** Takes the field changes of stored results; never blocks or fails a row (PgHistory.add). */
export interface HistorySink {
  add(workspace: string, runId: string, results: readonly RowResult[]): void;
}
