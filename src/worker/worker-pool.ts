import {
  DEFAULTS,
  derivedSettings,
  getWorkspace,
  resolveSettings,
  type Config,
  type Resolved,
} from '../config/index.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { catchUpBeforeRemoval, HistoryMarks, PgHistory, startHistoryCatchUp } from '../history/index.js';
import { MetricsRecorder } from '../metrics/index.js';
import {
  connectConfiguredRedis,
  isRedisFull,
  redisLiveness,
  watchRedisGeneration,
  type RedisClient,
} from '../redis/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { PRODUCER_SILENCE_MS } from '../lifecycle/index.js';
import { PoolPresence } from '../queue/index.js';
import type { RunRecord } from '../runs/index.js';
import { checkKey, createCrmClient, openRuntime, type Runtime } from '../runtime/index.js';
import { startEvictionWatch } from './eviction-watch.js';
import { startHousekeeping } from './housekeeping.js';
import type { SyncWorker } from './sync-worker.js';
import { WorkspaceRoster } from './workspace-roster.js';

export interface WorkerPoolOptions {
  config: Config;
  logger: Logger;
  /** Workspaces to serve. Default: every configured workspace (the config file is read again for new ones). */
  workspaces?: string[];
  /** Jobs in flight per active workspace in this process. Default DEFAULTS.worker.concurrency. */
  concurrency?: number;
  /** Job lock (crash recovery delay; ms). Default DEFAULTS.worker.lockDurationMs. */
  lockDurationMs?: number;
  /** Graceful close budget (ms). Default DEFAULTS.worker.closeTimeoutMs. */
  closeTimeoutMs?: number;
  /** Starts of one job (429 requeues included) before it fails. Default DEFAULTS.worker.maxStartedAttempts. */
  maxStartedAttempts?: number;
  /** How often failed jobs are swept for rows without a result (ms). Default DEFAULTS.worker.failedJobSweepMs. */
  sweepIntervalMs?: number;
  /** A run whose producer was silent this long is failed (ms). Default PRODUCER_SILENCE_MS. */
  producerSilenceMs?: number;
  /**
   * With `workspaces` named: ask the CRM for one record with each one's key before starting, and
   * refuse to start when a key is rejected (one process with a wrong key would otherwise pause
   * the workspace for every worker). A CRM that does not answer is only warned about: it may come
   * back. A pool serving every configured workspace does not ask (a thousand requests before the
   * first job); a refused key there blocks its workspace at the first 401. Default true.
   */
  checkKey?: boolean;
  /** How often retention housekeeping is tried (one process of the fleet per period; ms). Default DEFAULTS.worker.housekeepingMs. */
  housekeepingMs?: number;
  /** How often the work board is read for workspaces with jobs (ms). Default DEFAULTS.worker.pollMs. */
  pollMs?: number;
  /** A workspace with an empty queue and no running run for this long closes its worker (ms). Default DEFAULTS.worker.idleMs. */
  idleMs?: number;
  /**
   * Reads the config file again: called when jobs are queued for a workspace this process does
   * not know, so workspaces added to the file are served without a restart. Default: none.
   */
  reloadConfig?: () => Config;
  /** How often Redis's eviction policy and evicted keys are read (eviction-watch.ts; ms). Default DEFAULTS.worker.evictionCheckMs. */
  evictionCheckMs?: number;
  /** Started into a full Redis: how often the start is tried again (ms). Default DEFAULTS.worker.redisFullProbeMs. */
  fullProbeMs?: number;
  /** With a history database: how often ended runs are caught up (ms). Default DEFAULTS.history.catchUpMs. */
  historyCatchUpMs?: number;
  /**
   * Ends a start still under way: the key check's request, or the wait for room in a full Redis,
   * is called off and the start rejects with the signal's reason, having left nothing open (a
   * pool that got through its start is returned as usual: close it). Default: none.
   */
  signal?: AbortSignal;
}

/** The pool's options with every default filled in, once (startWorkerPool). */
type ResolvedPoolOptions = Resolved<
  WorkerPoolOptions,
  | 'concurrency'
  | 'lockDurationMs'
  | 'closeTimeoutMs'
  | 'maxStartedAttempts'
  | 'sweepIntervalMs'
  | 'producerSilenceMs'
  | 'checkKey'
  | 'housekeepingMs'
  | 'pollMs'
  | 'idleMs'
  | 'evictionCheckMs'
  | 'fullProbeMs'
  | 'historyCatchUpMs'
>;

function resolvePoolOptions(options: WorkerPoolOptions): ResolvedPoolOptions {
  const w = DEFAULTS.worker;
  return resolveSettings(options, {
    concurrency: w.concurrency,
    lockDurationMs: w.lockDurationMs,
    closeTimeoutMs: w.closeTimeoutMs,
    maxStartedAttempts: w.maxStartedAttempts,
    sweepIntervalMs: w.failedJobSweepMs,
    producerSilenceMs: PRODUCER_SILENCE_MS,
    checkKey: true,
    housekeepingMs: w.housekeepingMs,
    pollMs: w.pollMs,
    idleMs: w.idleMs,
    evictionCheckMs: w.evictionCheckMs,
    fullProbeMs: w.redisFullProbeMs,
    historyCatchUpMs: DEFAULTS.history.catchUpMs,
  });
}

export interface WorkerPool {
  runtime: Runtime;
  /** Workspaces this process holds a BullMQ worker for now: only those with work (WorkspaceRoster). */
  readonly active: ReadonlyMap<string, SyncWorker>;
  /** Reads the work board now instead of at the next poll. */
  refresh(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A worker process: one Redis connection made to ride out restarts, an announcement of what it
 * serves (PoolPresence), and a BullMQ worker only for the workspaces with work queued
 * (WorkspaceRoster; docs/architecture.md, "Idle workspaces"). Start-up does not grow with the
 * number of configured workspaces.
 */
export async function startWorkerPool(poolOptions: WorkerPoolOptions): Promise<WorkerPool> {
  const options = resolvePoolOptions(poolOptions);
  const { config, logger } = options;
  const named = options.workspaces?.length ? options.workspaces : undefined;
  if (!named && Object.keys(config.workspaces).length === 0) {
    throw new CrmSyncError(
      'CONFIG_INVALID',
      `no workspace configured${config.source ? ` in ${config.source}` : ''}: add one under "workspaces" in crm-sync.config.json`,
    );
  }
  for (const name of named ?? []) getWorkspace(config, name);
  if (named && options.checkKey)
    await Promise.all(named.map((name) => refuseRejectedKey(config, name, logger, options.signal)));
  // Started into a full Redis (maxmemory, noeviction), the first writes are refused: wait with one
  // line and start once it has room, rather than exit with a stack trace (a crash loop under a
  // supervisor, a line per restart).
  let waitingSince: number | undefined;
  for (;;) {
    options.signal?.throwIfAborted();
    try {
      const pool = await startPool(options, named);
      if (waitingSince !== undefined)
        logger.info(
          { seconds: Math.round((Date.now() - waitingSince) / 1000) },
          'Redis has room again: the worker started',
        );
      return pool;
    } catch (err) {
      if (!isRedisFull(err)) throw err;
      if (waitingSince === undefined) {
        waitingSince = Date.now();
        logger.error(
          { err: errorMessage(err) },
          'Redis is full (maxmemory reached): this worker waits to start until Redis has room; no row is sent meanwhile. Free memory or raise maxmemory',
        );
      }
      await sleep(options.fullProbeMs, undefined, options.signal ? { signal: options.signal } : {});
    }
  }
}

/** One try at starting the pool; whatever it opened is closed again when a step fails. */
async function startPool(options: ResolvedPoolOptions, named: string[] | undefined): Promise<WorkerPool> {
  const { config, logger } = options;
  const runtime = await openRuntime(config, logger, 'worker');
  // connectRedis started a liveness watchdog on the worker connection (it stops when the runtime
  // disconnects it); its warnings about a hung connection belong in this process's log.
  redisLiveness(runtime.redis)?.setLogger(logger);
  const generation = await watchRedisGeneration(runtime.redis, config.prefix, logger).catch(async (err: unknown) => {
    await runtime.close();
    throw err;
  });
  const metrics = new MetricsRecorder({ redis: runtime.redis, prefix: config.prefix });
  const presence = new PoolPresence({ redis: runtime.redis, prefix: config.prefix, workspaces: named ?? null });
  try {
    await presence.start();
  } catch (err) {
    generation.stop();
    await metrics.close();
    await runtime.close();
    throw err;
  }
  const marks = new HistoryMarks(runtime.redis, config.prefix);
  const history = config.history
    ? new PgHistory({ url: config.history.postgresUrl, table: config.history.table, logger, marks })
    : undefined;
  const roster = new WorkspaceRoster({
    config,
    logger,
    redis: runtime.redis,
    store: runtime.store,
    metrics,
    ...(named ? { workspaces: named } : {}),
    concurrency: options.concurrency,
    pollMs: options.pollMs,
    idleMs: options.idleMs,
    queueSweepMs: DEFAULTS.worker.queueSweepMs,
    retryStartMs: DEFAULTS.worker.retryStartMs,
    ...(options.reloadConfig ? { reloadConfig: options.reloadConfig } : {}),
    shared: {
      ...(history ? { history } : {}),
      lockDurationMs: options.lockDurationMs,
      closeTimeoutMs: options.closeTimeoutMs,
      maxStartedAttempts: options.maxStartedAttempts,
      sweepIntervalMs: options.sweepIntervalMs,
      producerSilenceMs: options.producerSilenceMs,
    },
  });
  roster.start();
  const evictions = startEvictionWatch({
    redis: runtime.redis,
    store: runtime.store,
    logger,
    workers: () => roster.active.values(),
    serves: (workspace) => !named || named.includes(workspace),
    everyMs: options.evictionCheckMs,
  });
  const catchUp = history
    ? {
        store: runtime.store,
        marks,
        db: history,
        logger,
        graceMs: DEFAULTS.history.catchUpGraceMs,
        batchRows: DEFAULTS.history.batchRows,
      }
    : undefined;
  const stopHousekeeping = startHousekeeping({
    ...(catchUp ? { beforeDelete: (run: RunRecord) => catchUpBeforeRemoval(catchUp, run) } : {}),
    redis: runtime.redis,
    store: runtime.store,
    prefix: config.prefix,
    resultsDir: config.resultsDir,
    retentionMs: derivedSettings({ retention: config.retention }).retentionMs,
    logger,
    everyMs: options.housekeepingMs,
  });
  // What a killed worker's buffer or a database down at close did not write, written from the
  // runs' results by whichever worker comes next (src/history/history-catch-up.ts).
  const stopCatchUp = catchUp
    ? startHistoryCatchUp({
        ...catchUp,
        everyMs: options.historyCatchUpMs,
        workspaces: () => named ?? Object.keys(config.workspaces),
      })
    : () => undefined;
  logger.info({ workspaces: named ?? 'every configured workspace' }, 'worker pool started');
  return {
    runtime,
    get active() {
      return roster.active;
    },
    refresh: () => roster.tick(),
    async close() {
      stopCatchUp();
      stopHousekeeping();
      evictions.stop();
      generation.stop();
      // Side by side, each bounded: each waits on Redis, which may be the thing that is gone,
      // and a SIGTERM must end the process within the close timeout plus a few seconds.
      await Promise.all([roster.close(), presence.stop()]);
      await Promise.race([
        Promise.all([metrics.close().catch(() => undefined), history?.close()]),
        new Promise((resolve) => setTimeout(resolve, 2000).unref()),
      ]);
      await runtime.close();
    },
  };
}

async function refuseRejectedKey(config: Config, name: string, logger: Logger, signal?: AbortSignal): Promise<void> {
  // The probe is a CRM request like any other: its token comes from the workspace's one budget.
  // When Redis cannot give one (down, or full), the probe is skipped, not sent outside the
  // budget: the workers' own first request meets a refused key all the same.
  let redis: RedisClient | undefined;
  try {
    redis = await connectConfiguredRedis(config, { role: 'client', name: 'crm-sync-key-check' });
    await workspaceRequestBudget(redis, config, name).take(signal);
  } catch (err) {
    redis?.disconnect();
    signal?.throwIfAborted();
    logger.warn(
      { workspace: name, err: errorMessage(err) },
      'the start-up check of the API key is skipped: no token could be taken from the request budget',
    );
    return;
  }
  redis.disconnect();
  const client = createCrmClient(config, name, logger);
  try {
    const key = await checkKey(client, undefined, signal);
    // Called off, the check's answer is no answer: not a CRM that did not answer.
    signal?.throwIfAborted();
    if (key.verdict === 'rejected')
      throw new CrmSyncError(
        'CRM_AUTH',
        `workspace ${name}: ${key.message}. This worker does not start: with a refused key it would pause the workspace for every worker. ` +
          'Fix the key (its env variable or file), then start it again; "crm-sync check" tests it.',
      );
    if (key.verdict !== 'ok')
      logger.warn({ workspace: name, check: key.verdict }, `starting all the same: ${key.message}`);
  } finally {
    client.close();
  }
}
