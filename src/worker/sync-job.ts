import type { Job, Worker } from 'bullmq';
import type { SyncJobData, SyncJobName } from '../queue/index.js';

/** A job of a workspace queue, as BullMQ hands it to the worker. */
export type SyncJob = Job<SyncJobData, unknown, SyncJobName>;
export type SyncJobWorker = Worker<SyncJobData, unknown, SyncJobName>;

/** Attempts the job was queued with: a job added without `attempts` runs once (BullMQ's rule, not a setting). */
export function jobAttempts(job: SyncJob): number {
  return job.opts.attempts ?? 1;
}
