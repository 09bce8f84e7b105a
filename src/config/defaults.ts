/**
 * Every default of crm-sync, once. The config schema (config-schema.ts), the loader
 * (load-config.ts), the CLI's option defaults (src/cli) and the library's option interfaces take
 * their defaults from here; values derived from settings (the write lease, job retention, the
 * create marker's life, the shutdown deadline) are computed by `derivedSettings` (derived-settings.ts).
 *
 * An inner part receives fully resolved settings; a public option interface (exported from
 * src/index.ts) may leave a field out, and its constructor or function resolves it from here once
 * (`resolveSettings`).
 *
 * This file imports nothing: the CLI's command declarations read it directly, without loading
 * zod through config/index.ts (test/cli/cli-startup.test.ts).
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A workspace's CRM settings in the config file (`workspaces.<name>`). */
const workspace = {
  retry: {
    /** Attempts per row in all, for transient failures (5xx, timeouts, resets); 429s never count. */
    attempts: 6,
    /** First retry delay, doubled each attempt with 50 % jitter (ms). */
    backoffMs: 1000,
  },
  /** Which list API version to page (the spec's list examples use v1). */
  listVersion: 'v2' as 'v1' | 'v2',
  /**
   * Update rows per queue job. Most of a worker's CPU besides HTTP is BullMQ's per-job work (two
   * Lua calls, a lock, events); ten rows share it (bench/RESULTS.md). Creates always travel alone.
   */
  rowsPerJob: 10,
  /** Wait before looking for the deal of a create whose answer was lost (ms): above any proxy's queue time. */
  createSettleMs: 30 * SECOND,
  /** Whole-request timeout of a CRM call (ms); the write lease is derived from it. */
  requestTimeoutMs: 15 * SECOND,
  /** The CRM failing this long with no success between is one warning with counts (ms). */
  outageWarningMs: 30 * SECOND,
  /** `crm-sync apply` refuses a plan nobody approved (`crm-sync plans approve`). */
  requireApproval: false,
  /** A stored plan can be approved and applied this long after it was made (ms). */
  planTtlMs: DAY,
  /**
   * Apply's drift check reads the resource's list again once its last read is this old (ms); a
   * pass is also spaced by 4 × its own duration (list pages stay ≤ 1/5 of the budget).
   */
  driftMaxAgeMs: 10 * SECOND,
  /**
   * A plain import's update reads its record's values before the write from list pages (in the
   * rate budget, shared by the process's rows), so its result keeps what it overwrote for
   * `runs undo` and `history`. Off: such rows keep only what they wrote.
   */
  readBefore: true,
  /**
   * Such a read serves a plain import's rows until it is this old (ms), or 20 × its own duration
   * (before-value pages stay ≤ 1/20 of the budget). Longer than driftMaxAgeMs: a before-value only
   * names what undo puts back, and one pass per 10 s of a workspace of 10,000 deals was a fifth of
   * a 50/s budget.
   */
  beforeMaxAgeMs: 60 * SECOND,
  /**
   * Names in a mapping (`"by": "name"`) resolve from the references list passes showed
   * (src/references, kept in Redis for every process); a pass older than this is read again
   * before a run resolves names (ms).
   */
  referencesMaxAgeMs: HOUR,
  breaker: {
    /** Unreachable failures in a row (no success between) that hold the workspace. */
    threshold: 5,
    /** How often a held workspace is probed with a one-record list (ms). */
    probeEveryMs: 15 * SECOND,
  },
} as const;

export const DEFAULTS = {
  /** Where the config comes from and what it says when it says nothing. */
  config: {
    /** The config file looked for in the working directory. */
    file: 'crm-sync.config.json',
    /** The one Redis (REDIS_URL wins over the file). */
    redisUrl: 'redis://127.0.0.1:6379',
    /** Redis key prefix for queues and run data (CRM_SYNC_PREFIX). */
    prefix: 'crm-sync',
    /** Log level (CRM_SYNC_LOG_LEVEL, LOG_LEVEL). */
    logLevel: 'info',
    /** Directory of exports (failed-row CSVs), relative to the config file. */
    resultsDir: 'crm-sync-results',
    /** Env variable holding the dashboard token. */
    dashboardTokenEnv: 'CRM_SYNC_DASHBOARD_TOKEN',
  },

  workspace,

  /** How long ended runs stay in Redis, and what lives as long as they may be retried. */
  retention: {
    /** Ended runs older than this are archived and removed (days). */
    days: 30,
    /**
     * Create markers and deal claims outlive the retention by this much (ms): runs are pruned by a
     * periodic housekeeping, so a run may be retried a little after its retention.
     */
    markerMarginMs: 2 * DAY,
    /** At most this many runs pruned per call (the housekeeping comes back for the rest). */
    pruneBatch: 1000,
  },

  /** A worker process (`crm-sync worker`, startWorkerPool). */
  worker: {
    /** Requests in flight per workspace in one process. */
    concurrency: 8,
    /**
     * A plain import's row waits this long for the list read of its record's value before (kept for
     * `runs undo`), then goes on with it unknown: the read never holds a row up for long (ms).
     */
    beforeReadWaitMs: 5 * SECOND,
    /** After a list read for before-values failed or was late, rows go on without one this long (ms). */
    beforeReadPauseMs: 30 * SECOND,
    /** Job lock: a crashed worker's jobs return to the queue after it (ms). */
    lockDurationMs: 30 * SECOND,
    /** Graceful close waits this long for in-flight requests (ms). */
    closeTimeoutMs: 30 * SECOND,
    /** A workspace with an empty queue and no running run this long closes its worker (ms). */
    idleMs: 30 * SECOND,
    /**
     * The write lease is the request timeout plus this (ms): a write on the wire counts as applied
     * until then, with a margin for a network that delivers late.
     */
    writeLeaseMarginMs: 15 * SECOND,
    /** Starts of one job, counting 429 requeues, before it fails for good. */
    maxStartedAttempts: 100,
    /** A 429 without Retry-After pauses the workspace this long (ms). */
    rateLimitPauseMs: 1000,
    /** How often the work board is read for workspaces with jobs (ms). */
    pollMs: 1000,
    /** How often queues are swept for jobs no work board entry names (ms). */
    queueSweepMs: 5 * MINUTE,
    /** A workspace whose worker could not start is tried again after this long (ms). */
    retryStartMs: MINUTE,
    /** How often failed jobs are swept for rows without a result (ms). */
    failedJobSweepMs: MINUTE,
    /** How often Redis' INFO is read for evictions (ms). */
    evictionCheckMs: 5 * SECOND,
    /** Started into, or paused by, a full Redis: how often a write is tried again (ms). */
    redisFullProbeMs: 5 * SECOND,
    /** How often a worker process tries the retention housekeeping; one process of the fleet does it (ms). */
    housekeepingMs: 10 * MINUTE,
    /** Circuit breaker: how often a closed breaker looks whether another process opened one (ms). */
    breakerWatchEveryMs: MINUTE,
    /** Circuit breaker: how long a probe that found the CRM vouches for later 404s being about records (ms). */
    breakerConfirmMs: MINUTE,
  },

  /** Looking for the deal of a create whose answer was lost (reconcile/deal-lookup, runs/lookup-pass-board). */
  lookup: {
    /** Least time between two list passes of a workspace (ms); at least a multiple of the last pass's length. */
    minPassGapMs: 30 * SECOND,
    /** A process that dies mid-pass holds the workspace's lookups up this long at most (ms). */
    passLeaseMs: 6 * SECOND,
    /** The pass board and the last snapshot outlive their last use by this (ms). */
    boardTtlMs: 15 * MINUTE,
  },

  /** A workspace's BullMQ queue. */
  queue: {
    /** Completed jobs kept: for an hour, at most this many. */
    completedJobs: { ageSeconds: HOUR / SECOND, count: 1000 },
    /** Failed jobs kept: for a week, at most this many. */
    failedJobs: { ageSeconds: (7 * DAY) / SECOND, count: 10_000 },
  },

  /** Reading a source into the queue (importFile, retryRun, resumeProducer). */
  producer: {
    /** Rows read and validated per step. */
    chunkSize: 500,
    /** Reading pauses while about this many rows wait in the queue (bounds Redis memory). */
    highWaterMark: 10_000,
    /** Emails per team-members request (team.invite). */
    inviteBatchSize: 50,
    /**
     * Update rows per job when a library caller names none (the CLI passes the workspace's
     * `rowsPerJob`); also what a run stored before the setting existed was produced with.
     */
    rowsPerJob: 1,
    /** How often a producing run's status is checked for a stop (ms; capped by the heartbeat). */
    watchMs: 500,
    /** Ride out Redis not answering this long while reading or following, then give up (ms). */
    redisOutageMs: 60 * SECOND,
    /** Ignored lines of a corrected retry file kept as a sample. */
    ignoredSample: 200,
  },

  /** The CRM client and the list reads built on it. */
  client: {
    /** Records per list request (the spec's recommended maximum). */
    pageSize: 100,
    /** Timeout to get a connected socket: lookup, connect, TLS (ms). */
    connectTimeoutMs: 5 * SECOND,
    /** Keep-alive agent size; near the worker concurrency. */
    maxSockets: 16,
    /** Retries of one list page after a transient failure. */
    pageRetries: 5,
    /** Waits of one list page after 429 (a busy workspace is no failure). */
    pageRateLimitRetries: 50,
    /** First backoff after a transient list failure, doubled each retry with jitter (ms). */
    pageRetryBaseDelayMs: 250,
    /** Longest backoff between list retries (ms). */
    pageRetryMaxDelayMs: 10 * SECOND,
    /** Full pages asked past a list's stated count (`total_pages`) before the pass ends with a warning. */
    pagesPastCount: 100,
  },

  /** Redis connections. */
  redis: {
    /** Connecting gives up after this (ms). */
    connectTimeoutMs: 5 * SECOND,
    /** A command not answered in this long fails (ms); above BullMQ's longest blocking read. */
    commandTimeoutMs: 15 * SECOND,
    /** Liveness check of a connection: a PING this often (ms)… */
    livenessIntervalMs: 5 * SECOND,
    /** …answered within this (ms). */
    livenessTimeoutMs: 5 * SECOND,
  },

  /** The shared token bucket that keeps a workspace's requests within its rate limit. */
  rateLimit: {
    /** Requests per second before anything is measured, for an unknown limit. */
    initialRate: 10,
    /** Waiting requests granted per Redis round trip, at most. */
    maxBatch: 64,
  },

  /** Counters written to Redis for the dashboard's charts. */
  metrics: {
    /** Buffered counts are written this often (ms). */
    flushMs: 1000,
  },

  /** Sync schedules (`crm-sync scheduler`, startSyncScheduler, runSync). */
  scheduler: {
    /** Directory of the sync definitions. */
    jobsDir: 'jobs',
    /** Ticks handled at once. */
    concurrency: 4,
    /** `close` waits this long for the syncs in hand (ms). */
    closeTimeoutMs: 30 * SECOND,
    /** How often a sync's run is checked while it goes (ms). */
    pollMs: 500,
    /** Lifetime of the per-sync lock, renewed while the sync runs (ms). */
    lockTtlMs: 60 * SECOND,
    /** Timeout of a sync's notify POST (ms). */
    notifyTimeoutMs: 10 * SECOND,
  },

  /** The CLI's own behaviour. */
  cli: {
    /** `import --work`, `schedule run --work`: requests in flight in the command's own worker. */
    workConcurrency: 8,
    /** `runs list`, `runs show --problems`: how many. */
    listLimit: 20,
    /** `runs show --changes`: written rows listed with their values before -> after. */
    changesShown: 5,
    /** Plain progress lines this often when stderr is not a TTY (ms). */
    progressLineEveryMs: 5 * SECOND,
    /** After a run ends, wait this long for its last counts to settle (ms). */
    settleWaitMs: 15 * SECOND,
    /**
     * Grace after the parts' close timeouts for the forced steps (disconnects) before the process
     * exits by itself (ms): docs/guarantees.md promises an exit within the close timeout plus 5 s,
     * whatever Redis does. A second signal exits at once.
     */
    shutdownGraceMs: 4 * SECOND,
  },

  /** The dashboard (`crm-sync dashboard`, buildDashboard). */
  dashboard: {
    /** TCP port. */
    port: 3000,
    /** Largest corrected CSV accepted for a retry (bytes). */
    maxUploadBytes: 50 * 1024 * 1024,
    /** Largest file a browser import takes (bytes); larger ones are pointed to the CLI. */
    maxImportBytes: 200 * 1024 * 1024,
    /** Runs per page on the runs page. */
    runsPageSize: 50,
    /** Failed rows per page on a run page. */
    problemsPageSize: 50,
    /** Absolute lifetime of a browser sign-in (ms). */
    sessionTtlMs: 12 * HOUR,
    /** A sign-in unused this long ends (ms). */
    sessionIdleMs: 30 * MINUTE,
    /** How long /readyz waits for Redis (ms). */
    readyTimeoutMs: 2 * SECOND,
    /** Newest runs one runs-page text search looks through. */
    searchScanRuns: 5000,
    /** Problem rows one error-text search request looks through. */
    searchScanRows: 5000,
    /** Problem rows the run page groups by cause. */
    groupScanRows: 10_000,
    /** Closing the HTTP server waits this long for requests in hand (ms). */
    closeTimeoutMs: 10 * SECOND,
    /** /metrics: finished runs (newest first) the duration histogram is built from. */
    metricsDurationRuns: 500,
    /** /metrics: most runs whose rows are summed per scrape, newest first. */
    metricsMaxRunsSummed: 20_000,
    /** /metrics: a scrape reuses data read less than this long ago (ms). */
    metricsCacheMs: 1000,
    /** Wrong tokens a client may send per window (and checks it may have at once). */
    authMaxFailures: 10,
    /** The sign-in throttle's window, from a client's first attempt in it (ms). */
    authWindowMs: 15 * MINUTE,
  },

  /** Reads over a run's stored rows and the run list. */
  runs: {
    /** Problem rows grouped by cause, at most, in row order. */
    groupScanRows: 100_000,
    /** Distinct cause groups kept; rows of further causes are counted as other. */
    maxGroups: 200,
    /** Row numbers kept per cause group. */
    groupSampleRows: 5,
    /** Newest runs one run search looks through. */
    searchScanRuns: 5000,
    /** Rows per page of an archived run's results. */
    archivePageSize: 50,
    /** A process following a run (runReads) reads its record this often when not told (ms). */
    followEveryMs: 250,
  },

  /** The PostgreSQL history of field changes (src/history/pg-history.ts). */
  history: {
    /** Table crm-sync creates and writes (optionally `schema.table`). */
    table: 'crm_sync_history',
    /** Changes per INSERT. */
    batchRows: 500,
    /** The longest a change waits in a worker before it is written (ms). */
    flushMs: 1000,
    /** Changes a worker holds while the database does not answer; beyond, older ones wait for the catch-up instead. */
    maxPending: 200_000,
    connectTimeoutMs: 5000,
    /** How often a worker looks for ended runs whose history did not all reach the table (one process of the fleet per workspace and period; ms). */
    catchUpMs: 15_000,
    /** An ended run is caught up once it ended this long ago: its writers' buffers have flushed by then (ms). */
    catchUpGraceMs: 5000,
  },

  /** Key layout migrations (runtime/migrate-layout). */
  migration: {
    /** How long a process waits for another one's migration (ms). */
    waitMs: 10 * MINUTE,
  },

  /** The CRM simulator's CLI (`crm-sync sim`). */
  sim: {
    /** TCP port. */
    port: 4010,
    /** Seeded deals, leads and contacts (each) per workspace. */
    records: 100,
    /** Seed of the generated data. */
    seed: 1,
  },
} as const;

export type Defaults = typeof DEFAULTS;

/** `O` with the fields named by `K` present and defined. */
export type Resolved<O, K extends keyof O> = Omit<O, K> & { [P in K]-?: Exclude<O[P], undefined> };

/**
 * `options` with every field `defaults` names filled in where it is missing or undefined: how a
 * public option interface's optional fields are resolved, once, where they enter.
 */
export function resolveSettings<O extends object, K extends keyof O>(
  options: O,
  defaults: { [P in K]-?: Exclude<O[P], undefined> },
): Resolved<O, K> {
  const out: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(options)) if (value !== undefined) out[key] = value;
  return out as Resolved<O, K>;
}
