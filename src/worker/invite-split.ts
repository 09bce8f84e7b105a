import type { Job } from 'bullmq';
import type { InviteBatchJobData, SyncJobData, SyncJobName, WorkspaceQueue } from '../queue/index.js';

/**
 * Replaces a rejected invite batch by its two halves, as new jobs (so each request passes the
 * rate limiter). Ids derive from the rows they hold, so a re-run of the parent adds nothing new.
 */
export async function splitInviteBatch(
  queue: WorkspaceQueue,
  job: Job<SyncJobData, unknown, SyncJobName>,
  data: InviteBatchJobData,
): Promise<void> {
  const mid = Math.ceil(data.rows.length / 2);
  const halves = [data.rows.slice(0, mid), data.rows.slice(mid)].filter((h) => h.length > 0);
  await queue.addBulk(
    halves.map((rows) => ({
      name: 'team.invite' as const,
      data: { runId: data.runId, rows, options: data.options },
      opts: { jobId: `${job.id ?? data.runId}-h${rows[0]?.row ?? 0}x${rows.length}` },
    })),
  );
}
