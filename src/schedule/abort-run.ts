import { stopRun } from '../lifecycle/index.js';
import { type WorkspaceQueue } from '../queue/index.js';
import type { RunStore } from '../runs/index.js';

/**
 * Stops a sync's run: status failed with the reason; rows still waiting in the queue are
 * removed and recorded `failed` (RUN_ABORTED), creates in doubt `uncertain`. See stopRun. Returns the rows recorded.
 */
export async function abortRun(store: RunStore, queue: WorkspaceQueue, runId: string, reason: string): Promise<number> {
  return (await stopRun(store, queue, runId, { kind: 'aborted', reason })).recorded;
}
