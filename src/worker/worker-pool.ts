import { getWorkspace, type Config } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { MetricsRecorder } from '../metrics/index.js';
import { redisLiveness, watchRedisGeneration } from '../queue/index.js';
import { checkKey, createCrmClient, openRuntime, type Runtime } from '../runtime/index.js';
import { startHousekeeping } from './housekeeping.js';
import { SyncWorker } from './sync-worker.js';

export interface WorkerPoolOptions {
  config: Config;
  logger: Logger;
  /** Workspaces to serve. Default: every configured workspace. */
  workspaces?: string[];
  /** Jobs in flight per workspace in this process. Default 8. */
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
   * Ask the CRM for one record with each workspace's key before serving it, and refuse to start
   * when the key is rejected: one process with a wrong key would otherwise pause the workspace
   * for every worker (a 401 mid-run still blocks it). A CRM that does not answer is only
   * warned about: it may come back. Default true.
   */
  checkKey?: boolean;
  /** How often retention housekeeping is tried (one process of the fleet per period). Default 600000 ms. */
  housekeepingMs?: number;
}

export interface WorkerPool {
  runtime: Runtime;
  workers: SyncWorker[];
  close(): Promise<void>;
}

/**
 * A write on the wire counts as applied this long after the request timeout: a network (a
 * proxy, a load balancer) can deliver a request the client already gave up on.
 */
const WRITE_LEASE_MARGIN_MS = 15_000;

/** One SyncWorker per workspace, sharing one Redis connection made to ride out restarts. */
export async function startWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  const { config, logger } = options;
  const names = options.workspaces?.length ? options.workspaces : Object.keys(config.workspaces);
  if (names.length === 0) {
    throw new CrmSyncError(
      'CONFIG_INVALID',
      `no workspace configured${config.source ? ` in ${config.source}` : ''}: add one under "workspaces" in crm-sync.config.json`,
    );
  }
  const runtime = await openRuntime(config, logger, 'worker');
  // connectRedis started a liveness watchdog on the worker connection (it stops when the runtime
  // disconnects it); its warnings about a hung connection belong in this process's log.
  redisLiveness(runtime.redis)?.setLogger(logger);
  const generation = await watchRedisGeneration(runtime.redis, config.prefix, logger);
  const workers: SyncWorker[] = [];
  const metrics = new MetricsRecorder({ redis: runtime.redis, prefix: config.prefix });
  try {
    for (const name of names) {
      const ws = getWorkspace(config, name);
      const concurrency = options.concurrency ?? 8;
      const client = createCrmClient(config, name, logger, { maxSockets: concurrency });
      if (options.checkKey ?? true) {
        const key = await checkKey(client);
        if (key.verdict === 'rejected') {
          client.close();
          throw new CrmSyncError(
            'CRM_AUTH',
            `workspace ${name}: ${key.message}. This worker does not start: with a refused key it would pause the workspace for every worker. ` +
              'Fix the key (its env variable or file), then start it again; "crm-sync check" tests it.',
          );
        }
        if (key.verdict !== 'ok')
          logger.warn({ workspace: name, check: key.verdict }, `starting all the same: ${key.message}`);
      }
      workers.push(
        await SyncWorker.start({
          workspace: name,
          client,
          store: runtime.store,
          connection: runtime.redis,
          prefix: config.prefix,
          concurrency,
          ...(ws.rateLimit ? { rateLimit: ws.rateLimit } : {}),
          retry: ws.retry,
          createSettleMs: ws.createSettleMs,
          breaker: ws.breaker,
          outageWarningMs: ws.outageWarningMs,
          writeLeaseMs: ws.requestTimeoutMs + WRITE_LEASE_MARGIN_MS,
          ...(options.lockDurationMs !== undefined ? { lockDurationMs: options.lockDurationMs } : {}),
          ...(options.closeTimeoutMs !== undefined ? { closeTimeoutMs: options.closeTimeoutMs } : {}),
          ...(options.maxStartedAttempts !== undefined ? { maxStartedAttempts: options.maxStartedAttempts } : {}),
          ...(options.sweepIntervalMs !== undefined ? { sweepIntervalMs: options.sweepIntervalMs } : {}),
          ...(options.producerSilenceMs !== undefined ? { producerSilenceMs: options.producerSilenceMs } : {}),
          logger,
          metrics,
        }),
      );
    }
  } catch (err) {
    generation.stop();
    await Promise.all(workers.map((w) => w.close()));
    await metrics.close();
    await runtime.close();
    throw err;
  }
  const stopHousekeeping = startHousekeeping({
    redis: runtime.redis,
    store: runtime.store,
    prefix: config.prefix,
    resultsDir: config.resultsDir,
    retentionMs: config.retention.days * 86_400_000,
    logger,
    ...(options.housekeepingMs !== undefined ? { everyMs: options.housekeepingMs } : {}),
  });
  return {
    runtime,
    workers,
    async close() {
      stopHousekeeping();
      generation.stop();
      await Promise.all(workers.map((w) => w.close()));
      // Bounded: metrics flush to Redis, which may be the thing that is gone.
      await Promise.race([
        metrics.close().catch(() => undefined),
        new Promise((resolve) => setTimeout(resolve, 2000).unref()),
      ]);
      await runtime.close();
    },
  };
}
