import { refusedKeyStatus, type CrmError } from '../crm/index.js';
import type { RunStore, WorkspaceHold } from '../runs/index.js';
import { workerCount } from './pool-presence.js';
import { pendingJobCount, type WorkspaceQueue } from './workspace-queue.js';
import { countOf } from '../counts/index.js';

/*
 * A workspace's queue is paused for reasons that mean different things (docs/architecture.md,
 * "Pauses"): `blocked` — the CRM refused the key (401); lifted by `runs resume` once the key is
 * fixed — `paused` — an operator's decision; lifted only by `workspace resume` — and
 * `unreachable` — the circuit breaker: the CRM does not answer; lifted by a probe that gets an
 * answer, or by `workspace resume`. Each is
 * recorded as a hold in the run store; the queue runs again only when no hold is left.
 * The hold is written before the queue is paused and checked before it is resumed, so lifting
 * one never lets the queue run while the other holds it (a lift racing a new block can resume
 * the queue for a moment: the next 401 blocks it again, and no row is burned by a 401).
 */

interface WorkspaceArgs {
  queue: WorkspaceQueue;
  store: RunStore;
  workspace: string;
}

/**
 * A 401 belongs to the workspace's key, not to a row: pause the whole workspace queue (every
 * worker process stops taking its jobs) and mark its running runs blocked. Nothing is burned:
 * rows stay queued until `resumeWorkspace`.
 */
export async function blockWorkspace(args: WorkspaceArgs & { error: CrmError }): Promise<void> {
  const { queue, store, workspace, error } = args;
  const reason =
    `The CRM refused the API key of workspace "${workspace}" (HTTP ${refusedKeyStatus(error)}: ${error.serviceMessage ?? error.message}). ` +
    `Fix the key (restart the workers if it comes from an env variable), then resume the run.`;
  await store.setHold(workspace, 'blocked', reason);
  await queue.pause();
  const { runs } = await store.listRuns({ workspace, status: 'running', limit: 1000 });
  // blockRun only moves runs still running: one that completed meanwhile stays completed.
  for (const run of runs) await store.blockRun(run.id, reason);
}

/**
 * Lifts a block by a refused key (`runs resume`): the blocked runs go on, and the queue runs
 * again unless an operator paused the workspace. Returns the ids of the runs resumed.
 */
export async function resumeWorkspace(args: WorkspaceArgs): Promise<string[]> {
  const { queue, store, workspace } = args;
  // Noted first: a 401 to a request sent before this, answered once the runs go on, is then
  // known for a stale one and blocks nothing again (WorkspacePause).
  await store.noteLift(workspace, 'blocked');
  const { runs } = await store.listRuns({ workspace, status: 'blocked', limit: 1000 });
  const resumed: string[] = [];
  for (const run of runs) if (await store.resumeRun(run.id)) resumed.push(run.id);
  const { stillHeld } = await store.liftHold(workspace, 'blocked');
  if (!stillHeld) await queue.resume();
  return resumed;
}

/** The reason an operator's pause is given when none is named. */
export const DEFAULT_PAUSE_REASON = 'paused by an operator';

/**
 * A pause in words after "workspace acme is": `paused by an operator`, `paused from the
 * dashboard`, `paused by an operator: nightly maintenance`. A reason that already says "paused"
 * (the default one does) is not repeated after it.
 */
export function pausedWords(reason: string): string {
  if (reason.trim() === '') return DEFAULT_PAUSE_REASON;
  return /\bpaused\b/i.test(reason) ? reason : `${DEFAULT_PAUSE_REASON}: ${reason}`;
}

/** An operator's pause (`workspace pause`, the dashboard): workers take none of its rows until `unpauseWorkspace`. */
export async function pauseWorkspace(args: WorkspaceArgs & { reason?: string }): Promise<void> {
  await args.store.setHold(args.workspace, 'paused', args.reason ?? DEFAULT_PAUSE_REASON);
  await args.queue.pause();
}

/**
 * The circuit breaker opened (docs/architecture.md, "Circuit breaker"): the CRM does not answer
 * like the CRM, so the queue stops for every worker instead of spending rows. Runs stay running.
 */
export async function holdUnreachable(args: WorkspaceArgs & { reason: string }): Promise<void> {
  await args.store.setHold(args.workspace, 'unreachable', args.reason);
  await args.queue.pause();
}

/** A probe got an answer: lifts the breaker's hold. Answers whether the queue runs again. */
export async function liftUnreachable(args: WorkspaceArgs): Promise<boolean> {
  const { lifted, stillHeld } = await args.store.liftHold(args.workspace, 'unreachable');
  if (!lifted || stillHeld) return false;
  await args.queue.resume();
  return true;
}

/**
 * Lifts an operator's pause and an open circuit breaker (the operator says "go on"): a
 * workspace blocked by a refused key stays paused (`runs resume` lifts that). Answers whether
 * the queue runs again.
 */
export async function unpauseWorkspace(args: WorkspaceArgs): Promise<{ running: boolean; blocked?: WorkspaceHold }> {
  await args.store.liftHold(args.workspace, 'unreachable');
  const { stillHeld } = await args.store.liftHold(args.workspace, 'paused');
  if (stillHeld) {
    const { blocked } = await args.store.holds(args.workspace);
    return { running: false, ...(blocked ? { blocked } : {}) };
  }
  await args.queue.resume();
  return { running: true };
}

export interface WorkspaceStatus {
  workspace: string;
  /** An operator's pause, if any. */
  paused?: WorkspaceHold;
  /** A block by a refused key, if any. */
  blocked?: WorkspaceHold;
  /** An open circuit breaker (the CRM does not answer), if any. */
  unreachable?: WorkspaceHold;
  /** BullMQ's own flag: true while any hold is set (or a pause from an older version). */
  queuePaused: boolean;
  /** Jobs waiting (including delayed), and being worked on. */
  waiting: number;
  active: number;
  /** Worker processes serving the workspace now (their announcements, PoolPresence). */
  workers: number;
  runningRuns: number;
  blockedRuns: number;
}

/** What `workspace status` and the dashboard show. */
export async function workspaceStatus(args: WorkspaceArgs): Promise<WorkspaceStatus> {
  const { queue, store, workspace } = args;
  const [holds, queuePaused, waiting, counts, workers, running, blocked] = await Promise.all([
    store.holds(workspace),
    queue.isPaused(),
    pendingJobCount(queue),
    queue.getJobCounts('active'),
    workerCount(store.redis, store.prefix, workspace),
    store.listRuns({ workspace, status: 'running', limit: 0 }),
    store.listRuns({ workspace, status: 'blocked', limit: 0 }),
  ]);
  return {
    workspace,
    ...(holds.paused ? { paused: holds.paused } : {}),
    ...(holds.blocked ? { blocked: holds.blocked } : {}),
    ...(holds.unreachable ? { unreachable: holds.unreachable } : {}),
    queuePaused,
    waiting,
    active: countOf(counts.active),
    workers,
    runningRuns: running.total,
    blockedRuns: blocked.total,
  };
}
