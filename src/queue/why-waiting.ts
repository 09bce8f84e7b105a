import type { RunStore } from '../runs/index.js';
import { workerCount } from './pool-presence.js';
import { pausedWords } from './workspace-control.js';

/**
 * Why a workspace's queued rows are not being taken, as facts: what the CLI (`import --wait`,
 * `runs retry --wait`) prints and the dashboard's run page shows, each in its own words, read
 * in one place so the two never disagree on what holds a run.
 */
export type WaitReason =
  /** The CRM refused the workspace's key (401): runs wait until it is fixed and resumed. */
  | { kind: 'blocked'; reason: string }
  /** An operator's pause; `reason` in words (pausedWords). */
  | { kind: 'paused'; reason: string }
  /** The circuit breaker holds the workspace: the CRM does not answer. */
  | { kind: 'unreachable'; reason: string }
  /** No worker process serves the workspace's queue. */
  | { kind: 'no-worker' };

/** What holds `workspace`'s rows now (empty: nothing). A worker count Redis cannot give is no reason. */
export async function whyRowsWait(store: RunStore, workspace: string): Promise<WaitReason[]> {
  const [holds, workers] = await Promise.all([
    store.holds(workspace),
    workerCount(store.redis, store.prefix, workspace).catch(() => -1),
  ]);
  const why: WaitReason[] = [];
  if (holds.blocked) why.push({ kind: 'blocked', reason: holds.blocked.reason });
  if (holds.paused) why.push({ kind: 'paused', reason: pausedWords(holds.paused.reason) });
  if (holds.unreachable) why.push({ kind: 'unreachable', reason: holds.unreachable.reason });
  if (workers === 0) why.push({ kind: 'no-worker' });
  return why;
}
