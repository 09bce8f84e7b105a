import { DelayedError } from 'bullmq';
import type { InviteBatchJobData, QueuedRow, RowBatchJobData, WorkspaceQueue } from '../queue/index.js';
import { jitter } from './row-results.js';
import { jobAttempts, type SyncJob } from './sync-job.js';

/*
 * Jobs a job turns into. Every new job's id derives from its parent and the rows it holds, so
 * a re-run of the parent (a lost lock, a stalled job) adds nothing new.
 */

/**
 * Rows of a batch continued as jobs of their own. `backoffMs`: they failed transiently and
 * start after a jittered first retry delay, with the attempts the batch had left but one.
 */
export async function handOff(
  queue: WorkspaceQueue,
  job: SyncJob,
  runId: string,
  rows: QueuedRow[],
  o: { backoffMs?: number },
): Promise<void> {
  const backoff = o.backoffMs !== undefined;
  const attempts = Math.max(1, jobAttempts(job) - job.attemptsMade - (backoff ? 1 : 0));
  await queue.addBulk(
    rows.map((r) => ({
      name: job.name,
      data: { runId, rows: [r] },
      opts: {
        jobId: `${job.id ?? runId}-s${r.row}`,
        attempts,
        ...(o.backoffMs !== undefined ? { delay: jitter(o.backoffMs) } : {}),
      },
    })),
  );
}

/**
 * Rows that must wait (another write to their record, or an identical create, is on the
 * wire; a create's settle time): a job of one row is delayed as it is, without spending an
 * attempt (this throws BullMQ's DelayedError); rows of a batch continue as delayed jobs.
 */
export async function defer(
  queue: WorkspaceQueue,
  job: SyncJob,
  token: string,
  data: RowBatchJobData,
  waiting: Array<{ row: QueuedRow; ms: number }>,
): Promise<void> {
  if (data.rows.length === 1 && waiting.length === 1) {
    await job.moveToDelayed(Date.now() + waiting[0]!.ms, token);
    throw new DelayedError();
  }
  await queue.addBulk(
    waiting.map(({ row, ms }) => ({
      name: job.name,
      data: { runId: data.runId, rows: [row] },
      opts: {
        jobId: `${job.id ?? data.runId}-w${row.row}-${job.attemptsStarted}`,
        attempts: Math.max(1, jobAttempts(job) - job.attemptsMade),
        delay: ms,
      },
    })),
  );
}

/** A rejected invite batch becomes its two halves, as new jobs (so each request passes the rate limiter). */
export async function splitInviteBatch(queue: WorkspaceQueue, job: SyncJob, data: InviteBatchJobData): Promise<void> {
  const mid = Math.ceil(data.rows.length / 2);
  const halves = [data.rows.slice(0, mid), data.rows.slice(mid)].filter((h) => h.length > 0);
  await queue.addBulk(
    halves.map((rows) => ({
      name: 'team.invite' as const,
      data: { runId: data.runId, rows, options: data.options },
      // Halves are never empty (filtered above).
      opts: { jobId: `${job.id ?? data.runId}-h${rows[0]!.row}x${rows.length}` },
    })),
  );
}
