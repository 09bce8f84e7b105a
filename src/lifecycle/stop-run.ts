import { operationEntry } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import {
  aborted,
  cancelled,
  uncertain,
  RowFence,
  type RowPlace,
  type RowResult,
  type RunRecord,
  type RunStore,
} from '../runs/index.js';
import { toJobData, type SyncJobData } from '../queue/index.js';
import type { WorkspaceQueue } from '../queue/index.js';

/**
 * Why a run stops before all its rows were sent. `cancelled`: an operator asked (`runs cancel`);
 * the run ends `cancelled`, its unsent rows `cancelled` (retryable), and its producer stops
 * reading. `aborted`: a nightly sync gave up on it (maxFailures, its lock lost); the run ends
 * `failed`, its unsent rows `failed` (RUN_ABORTED), and the producer reads on so that every
 * row of the file still gets its result.
 *
 * It is the `reason` of the AbortSignal a run's producer watches (run-life.ts).
 */
export interface RunStop {
  kind: 'cancelled' | 'aborted';
  reason: string;
}

/** The result of a row that was not sent because its run stopped. */
export function stoppedResult(stop: RunStop, place: RowPlace, original: Record<string, string> | undefined): RowResult {
  return stop.kind === 'cancelled' ? cancelled(place, stop.reason, original) : aborted(place, stop.reason, original);
}

/**
 * The result of a create that was in doubt when its run stopped (its answer was lost: it may
 * have made its deal) and that will not look for it now: never "not sent".
 */
export function stoppedInDoubt(
  stop: RunStop,
  place: RowPlace,
  original: Record<string, string> | undefined,
): RowResult {
  return uncertain(
    place,
    'CREATE_UNCERTAIN',
    `may have been created: the run stopped (${stop.reason}) while this create's answer was in doubt, before it looked for its deal; ` +
      'not sent again: `runs retry` looks for the deal before sending anything (do not import this row again)',
    original ?? {},
  );
}

/**
 * Rows among `rows` of a create run whose create may have been applied (a marker is left, or the
 * send evidence beside the row's result: RowFence.createsInDoubt).
 */
export async function createsInDoubt(
  store: RunStore,
  run: Pick<RunRecord, 'id' | 'workspace'>,
  rows: number[],
): Promise<Set<number>> {
  const fence = new RowFence({ redis: store.redis, prefix: store.prefix, workspace: run.workspace });
  return fence.createsInDoubt(run.id, rows);
}

/** What stopping a run did to its queued rows. */
export interface StopSummary {
  /** Rows recorded stopped (cancelled, or failed for an abort). */
  recorded: number;
  /**
   * Creates in their settle wait (an answer lost: they may have made their deal). A cancel
   * leaves their jobs queued so each finishes its look-up (recorded with its deal, uncertain, or
   * cancelled once the look-up proves nothing was made); an abort records them uncertain.
   */
  inDoubt: number;
}

/** The stop an AbortSignal carries, if it was aborted with one (anything else counts as a cancel). */
export function stopOf(signal: AbortSignal | undefined): RunStop | undefined {
  if (!signal?.aborted) return undefined;
  const r: unknown = signal.reason;
  if (typeof r === 'object' && r !== null && 'kind' in r && 'reason' in r) return r as RunStop;
  return { kind: 'cancelled', reason: r instanceof Error ? r.message : String(r) };
}

/**
 * Moves the run to its stopped status, then removes every job of the run still waiting in the
 * queue and records its rows as stopped, so no further row is sent and every row still ends
 * with a result. Jobs already taken by a worker stop at their next request (the write fence
 * refuses a row of a cancelled run, and the job records its unsent rows cancelled); a worker
 * that takes a job of a cancelled run records its rows cancelled instead of sending them.
 * Safe to repeat. Returns the number of rows it recorded.
 */
export async function stopRun(
  store: RunStore,
  queue: WorkspaceQueue,
  runId: string,
  stop: RunStop,
): Promise<StopSummary> {
  if (stop.kind === 'cancelled') await store.cancelRun(runId, stop.reason);
  else await store.setStatus(runId, 'failed', stop.reason);
  const run = await store.requireRun(runId);
  const page = 1000;
  const mine: Array<{ id: string; data: SyncJobData }> = [];
  for (let start = 0; ; start += page) {
    const jobs = await queue.getJobs(['waiting', 'delayed', 'prioritized'], start, start + page - 1, true);
    for (const job of jobs) {
      if (job?.id && job.data.runId === runId) mine.push({ id: job.id, data: toJobData(job.data) });
    }
    if (jobs.length < page) break;
  }
  let recorded = 0;
  let inDoubt = 0;
  for (const { id, data } of mine) {
    // A create in its settle wait may have made its deal: it is never recorded "not sent".
    const doubt = operationEntry(run.operation).creates
      ? await createsInDoubt(
          store,
          run,
          data.rows.map((r) => r.row),
        )
      : new Set<number>();
    if (doubt.size > 0 && stop.kind === 'cancelled') {
      // Its job stays: it finishes its look-up (the write fence lets a row with a marker look).
      inDoubt += doubt.size;
      continue;
    }
    // A worker may take the job meanwhile: then removal fails and the worker records the rows.
    const ok = await queue.remove(id).catch(() => 0);
    if (ok !== 1) continue;
    // A row that already has its result (sent by an earlier start of the job) keeps it.
    const done = new Set(
      (
        await store.getResults(
          runId,
          data.rows.map((r) => r.row),
        )
      ).map((r) => r.row),
    );
    const results = data.rows
      .filter((r) => !done.has(r.row))
      .map((r) => (doubt.has(r.row) ? stoppedInDoubt(stop, r, r.original) : stoppedResult(stop, r, r.original)));
    if (results.length > 0) await store.recordResults(runId, results);
    inDoubt += results.filter((r) => r.status === 'uncertain').length;
    recorded += results.length;
  }
  return { recorded, inDoubt };
}

export interface CancelRunOptions {
  store: RunStore;
  /**
   * The queue of a workspace, asked for only once the run is known to be cancellable (a run
   * that ended is refused for that, not for a workspace the caller has no queue for).
   */
  queueFor: (workspace: string) => WorkspaceQueue;
  runId: string;
  /** Said in the run's reason and each cancelled row's message. Default: "cancelled by an operator". */
  reason?: string;
}

export interface CancelSummary {
  /** The run as it stands after the cancel (status `cancelled`; rows in flight may still land). */
  run: RunRecord;
  /**
   * Rows taken out of the queue and recorded `cancelled` by this call: not all the run ends
   * with, as rows of jobs already taken and rows the producer still holds follow.
   */
  removed: number;
  /**
   * Creates in their settle wait, whose answer was lost (they may have made their deal): left to
   * finish their look-up, never recorded "not sent"; any left uncertain, `runs retry` resolves.
   */
  inDoubt: number;
}

/**
 * Cancels a running or blocked run (the CLI's `runs cancel`, the dashboard's button): rows
 * still waiting are removed and recorded `cancelled`, jobs already taken stop at their next
 * request (requests on the wire finish), and a producer
 * still reading the file stops at its next step (it learns from the run's status). A run that
 * has already ended is refused with RUN_STATE.
 */
export async function cancelRun(options: CancelRunOptions): Promise<CancelSummary> {
  const { store, runId } = options;
  const run = await store.requireRun(runId);
  if (run.status !== 'running' && run.status !== 'blocked') {
    throw new CrmSyncError(
      'RUN_STATE',
      `run ${runId} is ${run.status}: only a running or blocked run can be cancelled`,
    );
  }
  const stopped = await stopRun(store, options.queueFor(run.workspace), runId, {
    kind: 'cancelled',
    reason: options.reason ?? 'cancelled by an operator',
  });
  return { run: await store.requireRun(runId), removed: stopped.recorded, inDoubt: stopped.inDoubt };
}
