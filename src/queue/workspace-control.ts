import type { CrmError } from '../crm/index.js';
import type { RunStore } from '../runs/index.js';
import type { WorkspaceQueue } from './workspace-queue.js';

/**
 * A 401 belongs to the workspace's key, not to a row: pause the whole workspace queue (every
 * worker process stops taking its jobs) and mark its running runs blocked. Nothing is burned:
 * rows stay queued until `resumeWorkspace`.
 */
export async function blockWorkspace(args: { queue: WorkspaceQueue; store: RunStore; workspace: string; error: CrmError }): Promise<void> {
  const { queue, store, workspace, error } = args;
  await queue.pause();
  const reason =
    `The CRM refused the API key of workspace "${workspace}" (HTTP ${error.status ?? 401}: ${error.serviceMessage ?? error.message}). ` +
    `Fix the key (restart the workers if it comes from an env variable), then resume the run.`;
  const { runs } = await store.listRuns({ workspace, status: 'running', limit: 1000 });
  // blockRun only moves runs still running: one that completed meanwhile stays completed.
  for (const run of runs) await store.blockRun(run.id, reason);
}

/** Resumes a workspace queue and its blocked runs; returns the ids of the runs resumed. */
export async function resumeWorkspace(args: { queue: WorkspaceQueue; store: RunStore; workspace: string }): Promise<string[]> {
  const { queue, store, workspace } = args;
  const { runs } = await store.listRuns({ workspace, status: 'blocked', limit: 1000 });
  const resumed: string[] = [];
  for (const run of runs) if (await store.resumeRun(run.id)) resumed.push(run.id);
  await queue.resume();
  return resumed;
}
