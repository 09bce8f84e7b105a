import type { WorkspaceQueue } from '../queue/index.js';
import { countOf } from '../counts/index.js';

export interface QueueDepth {
  /** Jobs not started yet (waiting or prioritized; a paused queue keeps them here too). */
  waiting: number;
  active: number;
  /** Waiting for a retry backoff or a rate-limit window. */
  delayed: number;
  /** Jobs BullMQ gave up on (their rows are recorded as failed in the run). */
  failed: number;
  paused: boolean;
}

export async function queueDepth(queue: WorkspaceQueue): Promise<QueueDepth> {
  const [counts, paused] = await Promise.all([
    queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed'),
    queue.isPaused(),
  ]);
  const n = (state: string) => countOf(counts[state]);
  return {
    waiting: n('waiting') + n('prioritized'),
    active: n('active'),
    delayed: n('delayed'),
    failed: n('failed'),
    paused,
  };
}
