import { Queue } from 'bullmq';
import type { RedisClient } from '../redis/index.js';
import { DEFAULTS, derivedSettings } from '../config/index.js';
import { bullPrefix } from '../keys/index.js';
import { bullmqTelemetry } from '../telemetry/index.js';
import type { SyncJobData, SyncJobName } from './job-data.js';
import { queueName } from './queue-names.js';

export type WorkspaceQueue = Queue<SyncJobData, unknown, SyncJobName>;

export interface WorkspaceQueueOptions {
  /** A connected ioredis client; BullMQ shares it (queues do not block). */
  connection: RedisClient;
  /** Key prefix from the config. */
  prefix: string;
  workspace: string;
  /** Attempts for transient failures (5xx, timeouts, resets); 429s do not spend attempts. Default DEFAULTS.workspace.retry. */
  attempts?: number;
  /** First retry delay; doubles each attempt, with 50% jitter. Default DEFAULTS.workspace.retry. */
  backoffMs?: number;
}

/**
 * Completed jobs are dropped soon (results live in the run store, not in BullMQ); the events
 * stream is capped, so Redis holds O(in-flight) queue data whatever the file size.
 */
export function openWorkspaceQueue(options: WorkspaceQueueOptions): WorkspaceQueue {
  const queue = new Queue<SyncJobData, unknown, SyncJobName>(queueName(options.workspace), {
    connection: options.connection,
    prefix: bullPrefix(options.prefix),
    streams: { events: { maxLen: 2000 } },
    ...bullmqTelemetry(),
    defaultJobOptions: {
      attempts: options.attempts ?? DEFAULTS.workspace.retry.attempts,
      backoff: { type: 'exponential', delay: options.backoffMs ?? DEFAULTS.workspace.retry.backoffMs, jitter: 0.5 },
      ...derivedSettings().jobRetention,
    },
  });
  // While Redis restarts, ioredis reconnects by itself and the next command reports any failure;
  // without a listener BullMQ would print every reconnect attempt.
  queue.on('error', () => undefined);
  return queue;
}

/** Jobs waiting to run (not active, not finished): what the producer's high-water mark bounds. */
export async function pendingJobCount(queue: WorkspaceQueue): Promise<number> {
  const counts = await queue.getJobCounts('wait', 'prioritized', 'delayed');
  return Object.values(counts).reduce((a, b) => a + b, 0);
}
