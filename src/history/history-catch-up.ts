import { randomBytes } from 'node:crypto';
import { DEFAULTS } from '../config/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { HistoryMarks } from './history-marks.js';
import { changesOf, PgHistory, type HistoryChange } from './pg-history.js';

/** A run that owes history, and how many of its succeeded results are not known to be in the table. */
export interface OwedRun {
  run: RunRecord;
  owed: number;
}

const PAGE = 200;

/** The workspace's runs in Redis that owe history (newest first). */
export async function owedRuns(store: RunStore, marks: HistoryMarks, workspace: string): Promise<OwedRun[]> {
  const out: OwedRun[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const { runs } = await store.listRuns({ workspace, offset, limit: PAGE });
    const read = await marks.read(
      workspace,
      runs.map((r) => r.id),
    );
    runs.forEach((run, i) => {
      const owed = HistoryMarks.owed(run, read[i]!);
      if (owed > 0) out.push({ run, owed });
    });
    if (runs.length < PAGE) return out;
  }
}

/**
 * Writes every stored change of one run to the table (those already there are skipped), then
 * marks the run with the succeeded count read before the scan: everything counted then was
 * stored, so the scan saw it. Fewer succeeded results than counted means Redis lost some (an
 * eviction): recorded as a gap. Throws when the database does not take them.
 */
export async function catchUpRun(
  store: RunStore,
  marks: HistoryMarks,
  db: PgHistory,
  runId: string,
  batchRows: number,
): Promise<{ changes: number; missing: number } | null> {
  const run = await store.getRun(runId);
  if (run === null) return null;
  const succeeded = run.counts.succeeded;
  let seen = 0;
  let changes = 0;
  let batch: HistoryChange[] = [];
  for await (const r of store.iterateResults(run.id)) {
    if (r.status !== 'succeeded') continue;
    seen++;
    batch.push(...changesOf(run.workspace, run.id, r));
    if (batch.length >= batchRows) {
      await db.write(batch);
      changes += batch.length;
      batch = [];
    }
  }
  await db.write(batch);
  changes += batch.length;
  const missing = Math.max(0, succeeded - seen);
  if (missing > 0)
    await marks.addGap(run.workspace, {
      runId: run.id,
      rows: missing,
      reason: 'their results were found gone from Redis (evicted)',
      at: new Date().toISOString(),
    });
  await marks.setScanned(run.workspace, run.id, succeeded);
  return { changes, missing };
}

const ENDED = new Set(['completed', 'failed', 'cancelled']);

export interface CatchUpOptions {
  store: RunStore;
  marks: HistoryMarks;
  db: PgHistory;
  logger: Logger;
  /** An ended run is caught up once it ended this long ago (its writers' buffers had their flush). */
  graceMs: number;
  batchRows: number;
}

/**
 * Catches up the workspace's ended runs that owe history. A run still under way is left to its
 * writers until it ends (a killed worker's share is written then); `history` reads what a run
 * owes from Redis meanwhile. Answers how many runs were caught up. Throws when the database
 * does not answer (the next period tries again).
 */
export async function catchUpWorkspace(o: CatchUpOptions, workspace: string, now = Date.now()): Promise<number> {
  let caught = 0;
  for (const { run, owed } of await owedRuns(o.store, o.marks, workspace)) {
    if (!ENDED.has(run.status) || now - Date.parse(run.finishedAt ?? run.createdAt) < o.graceMs) continue;
    const done = await catchUpRun(o.store, o.marks, o.db, run.id, o.batchRows);
    if (done === null) continue;
    caught++;
    o.logger.info(
      { runId: run.id, workspace, owed, changes: done.changes, missing: done.missing },
      'history caught up from the run\u2019s results in Redis',
    );
  }
  return caught;
}

/**
 * Before retention removes a run from Redis: its history is caught up now, or, when the
 * database does not take it, the rows it owes are recorded as a gap that `history` reports.
 */
export async function catchUpBeforeRemoval(o: CatchUpOptions, run: RunRecord): Promise<void> {
  const [mark] = await o.marks.read(run.workspace, [run.id]);
  const owed = HistoryMarks.owed(run, mark!);
  if (owed === 0) return;
  try {
    await catchUpRun(o.store, o.marks, o.db, run.id, o.batchRows);
  } catch (err) {
    await o.marks.addGap(run.workspace, {
      runId: run.id,
      rows: owed,
      reason: `the run was removed from Redis while the history database did not answer (${errorMessage(err)}); its archive, if one was written, holds them`,
      at: new Date().toISOString(),
    });
    o.logger.warn(
      { runId: run.id, owed, err: errorMessage(err) },
      'history gap: a run left Redis before its changes reached the history database',
    );
  }
}

/**
 * Any worker's catch-up: at start and every `everyMs`, one process of the fleet per workspace
 * and period writes the history its ended runs owe (a worker killed mid-run, a database down
 * when a worker stopped). Returns the stop function.
 */
export function startHistoryCatchUp(
  o: CatchUpOptions & { workspaces: () => Iterable<string>; everyMs: number },
): () => void {
  const token = randomBytes(8).toString('hex');
  let busy = false;
  let failing = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      for (const workspace of o.workspaces()) {
        if (!(await o.marks.takeTurn(workspace, token, o.everyMs))) continue;
        await catchUpWorkspace(o, workspace);
      }
      if (failing) o.logger.info('history catch-up: the history database answers again');
      failing = false;
    } catch (err) {
      if (!failing)
        o.logger.warn(
          { err: errorMessage(err) },
          'history catch-up did not get through (the runs keep their changes in Redis); tried again next period',
        );
      failing = true;
    } finally {
      busy = false;
    }
  };
  const first = setTimeout(() => void tick(), Math.min(o.everyMs, o.graceMs));
  const timer = setInterval(() => void tick(), o.everyMs);
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}

/**
 * For a command that removes runs from Redis (`runs prune`, `runs delete`): the history's last
 * catch-up of each run first (catchUpBeforeRemoval), on a database connection of its own.
 */
export function removalCatchUp(
  history: { postgresUrl: string; table: string },
  store: RunStore,
  logger: Logger,
): { beforeDelete(run: RunRecord): Promise<void>; close(): Promise<void> } {
  const db = new PgHistory({ url: history.postgresUrl, table: history.table, logger });
  const o: CatchUpOptions = {
    store,
    marks: new HistoryMarks(store.redis, store.prefix),
    db,
    logger,
    graceMs: 0,
    batchRows: DEFAULTS.history.batchRows,
  };
  return { beforeDelete: (run) => catchUpBeforeRemoval(o, run), close: () => db.close() };
}
