import type { RunRecord, RunStore } from '../runs/index.js';

/**
 * Where a run of a sync stands, as far as the next tick is concerned:
 * - `running`: producer done, rows in the queue — the tick must wait;
 * - `orphan`: running but its producer has not finished — it died, or lost the sync lock;
 * - `blocked`: the CRM refused the key with rows still to send — resuming it continues them,
 *   so a new run now would overlap it;
 * - `over`: nothing of it can be sent any more (completed, failed, or blocked with no row left).
 */
export type PreviousRunState = 'running' | 'orphan' | 'blocked' | 'over';

export function previousRunState(run: RunRecord): PreviousRunState {
  if (run.status === 'running') return run.producerDone ? 'running' : 'orphan';
  if (run.status === 'blocked') return run.producerDone && run.counts.queued === 0 ? 'over' : 'blocked';
  return 'over';
}

/** Blocked runs looked at per tick; more than a few blocked runs of one sync is already an alarm. */
const BLOCKED_SCAN = 20;

/** The newest run of the sync that is not over (running, orphaned or blocked), if any. */
export async function findPreviousRun(store: RunStore, syncName: string): Promise<RunRecord | undefined> {
  const [running, blocked] = await Promise.all([
    store.listRuns({ syncName, status: 'running', limit: 1 }),
    store.listRuns({ syncName, status: 'blocked', limit: BLOCKED_SCAN }),
  ]);
  const candidates = [...running.runs, ...blocked.runs].filter((r) => previousRunState(r) !== 'over');
  // The newest decides.
  return candidates.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))[0];
}

export function blockedSkipReason(run: RunRecord): string {
  return `previous run ${run.id} is blocked (the CRM refused the API key): fix the key and resume it; ticks are skipped until it ends`;
}
