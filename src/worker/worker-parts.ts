import { Worker, type Processor } from 'bullmq';
import { bullPrefix, probeKey, requestBudgetKey } from '../keys/index.js';
import { DEFAULTS, derivedSettings } from '../config/index.js';
import type { Logger } from '../log/index.js';
import { SharedTokenBucket } from '../rate/index.js';
import { RedisFullGuard } from '../redis/index.js';
import {
  holdUnreachable,
  liftUnreachable,
  openWorkspaceQueue,
  queueName,
  type SyncJobData,
  type SyncJobName,
} from '../queue/index.js';
import { LookupPassBoard, RowFence } from '../runs/index.js';
import { checkKey } from '../runtime/index.js';
import { bullmqTelemetry } from '../telemetry/index.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { DealLookup, DuplicateSafeCreate } from './creates/index.js';
import { DriftCheck } from './drift-check.js';
import { CrmOutageWatch } from './crm-outage-watch.js';
import { FailedJobSweep } from './failed-job-sweep.js';
import { JobLockWatch } from './job-locks.js';
import { RowSender } from './row-sender.js';
import type { SyncJobWorker } from './sync-job.js';
import type { SyncWorkerOptions } from './sync-worker-options.js';
import { WorkerCore } from './worker-core.js';
import { WorkerMetrics } from './worker-metrics.js';
import { WorkspacePause } from './workspace-pause.js';

/** A SyncWorker's parts, built from its options; the BullMQ worker once its processor is known. */
export interface SyncWorkerParts {
  core: WorkerCore;
  sweep: FailedJobSweep;
  logger: Logger;
  closeTimeoutMs: number;
  rateLimit: SyncWorkerOptions['rateLimit'];
  /** Opens the BullMQ worker (not yet running), with the watches on its job locks and on Redis being full. */
  openWorker(process: Processor<SyncJobData, unknown, SyncJobName>): {
    worker: SyncJobWorker;
    locks: JobLockWatch;
    full: RedisFullGuard;
  };
}

export function buildWorkerParts(options: SyncWorkerOptions): SyncWorkerParts {
  const { workspace, client, store, connection: redis, prefix } = options;
  const logger = options.logger.child({ workspace });
  const settleMs = options.createSettleMs;
  const fence = new RowFence({
    redis,
    prefix,
    workspace,
    leaseMs: options.writeLeaseMs,
    retentionMs: options.retentionMs,
  });
  // Every request, a row's or a lookup's list page, spends the same shared budget.
  const bucket = new SharedTokenBucket({
    redis,
    key: requestBudgetKey(prefix, workspace),
    ...(options.rateLimit ? { limit: options.rateLimit } : {}),
  });
  // A known limit's margin covers how late this process's requests reach the wire (the client
  // is the worker's own: it closes with it, and the watch with it).
  client.watchSendDelays((ms) => bucket.noteSendDelay(ms));
  const lookup = new DealLookup({
    client,
    fence,
    board: new LookupPassBoard({ redis, prefix, workspace }),
    limiter: bucket,
    pageSize: DEFAULTS.client.pageSize,
    minGapMs: settleMs,
    automationFields: options.automationFields,
    logger,
  });
  const creates = new DuplicateSafeCreate({
    client,
    fence,
    lookup,
    settleMs,
    logger,
  });
  const queue = openWorkspaceQueue({
    connection: redis,
    prefix,
    workspace,
    attempts: options.retry.attempts,
    backoffMs: options.retry.backoffMs,
  });
  const metrics = new WorkerMetrics(options.metrics, workspace);
  const pause = new WorkspacePause({
    workspace,
    queue,
    store,
    bucket,
    metrics,
    logger,
    learnsRate: !options.rateLimit,
  });
  const outage = new CrmOutageWatch({
    logger,
    rowsWaiting: () => rowsWaiting(options),
    thresholdMs: options.outageWarningMs,
  });
  const held = { queue, store, workspace };
  const breaker = new CircuitBreaker({
    baseUrl: client.baseUrl,
    probe: () => checkKey(client),
    open: (reason) => holdUnreachable({ ...held, reason }),
    close: () => liftUnreachable(held),
    isOpen: async () => (await store.holds(workspace)).unreachable !== undefined,
    takeToken: async () => void (await bucket.take(undefined)),
    logger,
    threshold: options.breaker.threshold,
    probeEveryMs: options.breaker.probeEveryMs,
    confirmMs: DEFAULTS.worker.breakerConfirmMs,
    watchEveryMs: DEFAULTS.worker.breakerWatchEveryMs,
  });
  const maxStarts = options.maxStartedAttempts;
  const core = new WorkerCore({
    workspace,
    client,
    store,
    ...(options.history ? { history: options.history } : {}),
    fence,
    queue,
    sender: new RowSender({
      client,
      fence,
      creates,
      logger,
      budget: bucket,
      readBefore: options.readBefore ?? DEFAULTS.workspace.readBefore,
      drift: new DriftCheck({
        client,
        budget: bucket,
        maxAgeMs: options.driftMaxAgeMs,
        beforeMaxAgeMs: options.beforeMaxAgeMs ?? DEFAULTS.workspace.beforeMaxAgeMs,
        // One before-value pass serves every worker process of the workspace (drift-check.ts).
        beforeBoards: (before) => new LookupPassBoard({ redis, prefix, workspace, before }),
        logger,
        creates: { fence, automationFields: options.automationFields },
      }),
    }),
    bucket,
    breaker,
    outage,
    pause,
    metrics,
    logger,
    lockPrefix: `${bullPrefix(prefix)}:${queueName(workspace)}:`,
    maxStarts,
    settleMs,
    backoffMs: options.retry.backoffMs,
  });
  const sweep = new FailedJobSweep({
    workspace,
    queue,
    store,
    fence,
    write: (job, runId, results) => core.store(job, runId, results),
    logger,
    intervalMs: options.sweepIntervalMs,
    producerSilenceMs: options.producerSilenceMs,
  });
  const lockDuration = options.lockDurationMs;
  const openWorker: SyncWorkerParts['openWorker'] = (process) => {
    const worker: SyncJobWorker = new Worker(queueName(workspace), process, {
      connection: redis,
      prefix: bullPrefix(prefix),
      concurrency: options.concurrency,
      autorun: false,
      // One more than our own cap: the processor records the row's result on its last start
      // itself, so BullMQ failing the job on its own is only a backstop (FailedJobSweep).
      maxStartedAttempts: maxStarts + 1,
      lockDuration,
      stalledInterval: options.stalledIntervalMs ?? lockDuration,
      maxStalledCount: 5,
      ...derivedSettings().jobRetention,
      ...bullmqTelemetry(),
    });
    const locks = new JobLockWatch(worker, { lockDurationMs: lockDuration, logger });
    const full = new RedisFullGuard({
      worker,
      redis,
      probeKey: probeKey(prefix, workspace),
      logger,
      probeMs: DEFAULTS.worker.redisFullProbeMs,
      stops: 'this worker stops taking jobs',
      resumes: 'taking jobs',
    });
    return { worker, locks, full };
  };
  return { core, sweep, logger, closeTimeoutMs: options.closeTimeoutMs, rateLimit: options.rateLimit, openWorker };
}

/** Rows of the workspace's running runs that have no result yet (the newest 200 runs). */
async function rowsWaiting({ store, workspace }: SyncWorkerOptions): Promise<number> {
  const { runs } = await store.listRuns({ workspace, status: 'running', limit: 200 });
  return runs.reduce((sum, run) => sum + run.counts.queued, 0);
}
