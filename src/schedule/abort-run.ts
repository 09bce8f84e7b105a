import { toJobData, type SyncJobData, type WorkspaceQueue } from '../queue/index.js';
import type { RowResult, RunStore } from '../runs/index.js';

/**
 * Stops a run: status failed with the reason, and every job of the run still waiting in the
 * queue is removed and its rows recorded `failed` (RUN_ABORTED), so no further row is sent and
 * every row still ends with a result. Jobs already in flight finish and record their own result.
 * Returns the number of rows recorded aborted.
 */
export async function abortRun(store: RunStore, queue: WorkspaceQueue, runId: string, reason: string): Promise<number> {
  await store.setStatus(runId, 'failed', reason);
  const page = 1000;
  const mine: Array<{ id: string; data: SyncJobData }> = [];
  for (let start = 0; ; start += page) {
    const jobs = await queue.getJobs(['waiting', 'delayed', 'prioritized'], start, start + page - 1, true);
    for (const job of jobs) {
      if (job?.id && job.data.runId === runId) mine.push({ id: job.id, data: toJobData(job.data) });
    }
    if (jobs.length < page) break;
  }
  const at = new Date().toISOString();
  let aborted = 0;
  for (const { id, data } of mine) {
    // A worker may take the job meanwhile: then removal fails and the worker records the rows.
    const ok = await queue.remove(id).catch(() => 0);
    if (ok !== 1) continue;
    // A row that already has its result (sent by an earlier start of the job) keeps it.
    const recorded = new Set((await store.getResults(runId, data.rows.map((r) => r.row))).map((r) => r.row));
    const results: RowResult[] = data.rows
      .filter((r) => !recorded.has(r.row))
      .map((r) => ({ row: r.row, line: r.line, status: 'failed', code: 'RUN_ABORTED', message: `not sent: ${reason}`, original: r.original, at }));
    if (results.length > 0) await store.recordResults(runId, results);
    aborted += results.length;
  }
  return aborted;
}
