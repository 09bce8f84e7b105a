import { getWorkspace, type Config } from '../config/index.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { MetricsRecorder } from '../metrics/index.js';
import { isRedisFull, redisLiveness, watchRedisGeneration } from '../redis/index.js';
import { PoolPresence } from '../queue/index.js';
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
  /** Jobs in flight per active workspace in this process. Default 8. */
  concurrency?: number;
  /** Job lock (crash recovery delay). Default 30000 ms. */
  lockDurationMs?: number;
  /** Graceful close budget. Default 30000 ms. */
  closeTimeoutMs?: number;
  /** Starts of one job (429 requeues included) before it fails. Default 100. */
  maxStartedAttempts?: number;
  /** Period of the worker's housekeeping sweep. Default 60000 ms. */
  sweepIntervalMs?: number;
  /** A run whose producer was silent this long is failed. Default 120000 ms. */
  producerSilenceMs?: number;
  /**
   * With `workspaces` named: ask the CRM for one record with each one's key before starting, and
   * refuse to start when a key is rejected (one process with a wrong key would otherwise pause
   * the workspace for every worker). A CRM that does not answer is only warned about: it may come
   * back. A pool serving every configured workspace does not ask (a thousand requests before the
   * first job); a refused key there blocks its workspace at the first 401. Default true.
   */
  checkKey?: boolean;
  /** How often retention housekeeping is tried (one process of the fleet per period). Default 600000 ms. */
  housekeepingMs?: number;
  /** How often the work board is read for workspaces with jobs. Default 1000 ms. */
  pollMs?: number;
  /** A workspace with an empty queue and no running run for this long closes its worker. Default 30000 ms. */
  idleMs?: number;
  /**
   * Reads the config file again: called when jobs are queued for a workspace this process does
   * not know, so workspaces added to the file are served without a restart. Default: none.
   */
  reloadConfig?: () => Config;
  /** How often Redis's eviction policy and evicted keys are read (eviction-watch.ts). Default 5000 ms. */
  evictionCheckMs?: number;
  /** Started into a full Redis: how often the start is tried again. Default 5000 ms. */
  fullProbeMs?: number;
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
export async function startWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  const { config, logger } = options;
  const named = options.workspaces?.length ? options.workspaces : undefined;
  if (!named && Object.keys(config.workspaces).length === 0) {
    throw new CrmSyncError(
      'CONFIG_INVALID',
      `no workspace configured${config.source ? ` in ${config.source}` : ''}: add one under "workspaces" in crm-sync.config.json`,
    );
  }
  for (const name of named ?? []) getWorkspace(config, name);
  if (named && (options.checkKey ?? true))
    await Promise.all(named.map((name) => refuseRejectedKey(config, name, logger)));
  // Started into a full Redis (maxmemory, noeviction), the first writes are refused: wait with one
  // line and start once it has room, rather than exit with a stack trace (a crash loop under a
  // supervisor, a line per restart).
  let waitingSince: number | undefined;
  for (;;) {
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
      await sleep(options.fullProbeMs ?? 5000);
    }
  }
}

/** One try at starting the pool; whatever it opened is closed again when a step fails. */
async function startPool(options: WorkerPoolOptions, named: string[] | undefined): Promise<WorkerPool> {
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
  const roster = new WorkspaceRoster({
    config,
    logger,
    redis: runtime.redis,
    store: runtime.store,
    metrics,
    ...(named ? { workspaces: named } : {}),
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
    ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
    ...(options.idleMs !== undefined ? { idleMs: options.idleMs } : {}),
    ...(options.reloadConfig ? { reloadConfig: options.reloadConfig } : {}),
    shared: {
      ...(options.lockDurationMs !== undefined ? { lockDurationMs: options.lockDurationMs } : {}),
      ...(options.closeTimeoutMs !== undefined ? { closeTimeoutMs: options.closeTimeoutMs } : {}),
      ...(options.maxStartedAttempts !== undefined ? { maxStartedAttempts: options.maxStartedAttempts } : {}),
      ...(options.sweepIntervalMs !== undefined ? { sweepIntervalMs: options.sweepIntervalMs } : {}),
      ...(options.producerSilenceMs !== undefined ? { producerSilenceMs: options.producerSilenceMs } : {}),
    },
  });
  roster.start();
  const evictions = startEvictionWatch({
    redis: runtime.redis,
    store: runtime.store,
    logger,
    workers: () => roster.active.values(),
    serves: (workspace) => !named || named.includes(workspace),
    ...(options.evictionCheckMs !== undefined ? { everyMs: options.evictionCheckMs } : {}),
  });
  const stopHousekeeping = startHousekeeping({
    redis: runtime.redis,
    store: runtime.store,
    prefix: config.prefix,
    resultsDir: config.resultsDir,
    retentionMs: config.retention.days * 86_400_000,
    logger,
    ...(options.housekeepingMs !== undefined ? { everyMs: options.housekeepingMs } : {}),
  });
  logger.info({ workspaces: named ?? 'every configured workspace' }, 'worker pool started');
  return {
    runtime,
    get active() {
      return roster.active;
    },
    refresh: () => roster.tick(),
    async close() {
      stopHousekeeping();
      evictions.stop();
      generation.stop();
      // Side by side, each bounded: each waits on Redis, which may be the thing that is gone,
      // and a SIGTERM must end the process within the close timeout plus a few seconds.
      await Promise.all([roster.close(), presence.stop()]);
      await Promise.race([
        metrics.close().catch(() => undefined),
        new Promise((resolve) => setTimeout(resolve, 2000).unref()),
      ]);
      await runtime.close();
    },
  };
}

async function refuseRejectedKey(config: Config, name: string, logger: Logger): Promise<void> {
  const client = createCrmClient(config, name, logger);
  try {
    const key = await checkKey(client);
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
