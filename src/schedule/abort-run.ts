import type { SyncJobData, WorkspaceQueue } from '../queue/index.js';
import type { RowResult, RunStore } from '../runs/index.js';

/**
 * Stops a run: status failed with the reason, and every job of the run still waiting in the
 * queue is removed and its rows recorded `failed` (RUN_ABORTED), so no further row is sent and
 * every row still ends with a result. Jobs already in flight finish and record their own result.
 */
export async function abortRun(store: RunStore, queue: WorkspaceQueue, runId: string, reason: string): Promise<number> {
  await store.setStatus(runId, 'failed', reason);
  const page = 1000;
  const mine: Array<{ id: string; data: SyncJobData }> = [];
  for (let start = 0; ; start += page) {
    const jobs = await queue.getJobs(['waiting', 'delayed', 'prioritized'], start, start + page - 1, true);
    for (const job of jobs) {
      if (job?.id && job.data.runId === runId) mine.push({ id: job.id, data: job.data });
    }
    if (jobs.length < page) break;
  }
  const at = new Date().toISOString();
  const results: RowResult[] = [];
  for (const { id, data } of mine) {
    // A worker may take the job meanwhile: then removal fails and the worker records the rows.
    const ok = await queue.remove(id).catch(() => 0);
    if (ok !== 1) continue;
    for (const r of data.rows) {
      results.push({ row: r.row, line: r.line, status: 'failed', code: 'RUN_ABORTED', message: `not sent: ${reason}`, original: r.original, at });
    }
  }
  if (results.length > 0) await store.recordResults(runId, results);
  return results.length;
}
