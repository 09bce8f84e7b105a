import { errorMessage } from '../errors/index.js';
import { ArchivedRuns, type RunNames } from '../runs/index.js';
import { owedRuns } from './history-catch-up.js';
import { HistoryMarks } from './history-marks.js';
import { PgHistory } from './pg-history.js';
import { collect, recordHistory, type HistoryEntry, type RecordHistoryOptions } from './record-history.js';

export interface HistoryOfOptions extends RecordHistoryOptions {
  /** The config's `history`: with a database, it answers (from an index, whatever Redis pruned). */
  history?: { postgresUrl: string; table: string } | undefined;
}

/** A record's history, and what the reader should know about where it came from. */
export interface HistoryReport {
  entries: HistoryEntry[];
  /** Plain sentences: the database did not answer (read from Redis instead), or changes it can never hold. */
  notes: string[];
}

/**
 * A record's history from where it is kept: the PostgreSQL history when one is configured,
 * else the workspace's runs in Redis and their archives. The CLI and the dashboard both ask here.
 *
 * With a database, runs that still owe it changes (under way, or not caught up yet: a worker was
 * killed, the database was down) are read from Redis too, so a change is never missing while its
 * run is there; changes that can no longer reach the table (history gaps) are named in a note.
 * A database that does not answer is said in a note, and the history is read from Redis instead.
 */
export async function historyReport(options: HistoryOfOptions): Promise<HistoryReport> {
  const { history, ...fromRuns } = options;
  if (!history) return { entries: await recordHistory(fromRuns), notes: [] };
  const { store, workspace, recordId } = options;
  const marks = new HistoryMarks(store.redis, store.prefix);
  const db = new PgHistory({ url: history.postgresUrl, table: history.table });
  let stored: HistoryEntry[];
  // A stored change's names are its run's (in Redis, or in its archive), read once per run.
  const names = new Map<string, Promise<RunNames>>();
  const archived = new ArchivedRuns(options.resultsDir);
  const namesOf = (runId: string): Promise<RunNames> => {
    let got = names.get(runId);
    if (got === undefined) {
      got = store
        .names(runId)
        .then((n) => (Object.keys(n).length === 0 && archived.has(runId) ? archived.names(runId) : n))
        .catch(() => ({}));
      names.set(runId, got);
    }
    return got;
  };
  try {
    stored = await db.query(workspace, recordId, namesOf);
  } catch (err) {
    return {
      entries: await recordHistory(fromRuns),
      notes: [
        `the history database does not answer (${errorMessage(err)}): this history is read from the workspace's runs in Redis ` +
          `and their archives in ${options.resultsDir} instead; changes of runs no longer in either are not in it`,
      ],
    };
  } finally {
    await db.close();
  }
  const seen = new Set(stored.map((e) => `${e.runId}\n${e.row}\n${e.field}`));
  const owed: HistoryEntry[] = [];
  for (const { run } of await owedRuns(store, marks, workspace)) await collect(store, run, recordId, 'redis', owed);
  const entries = [...stored, ...owed.filter((e) => !seen.has(`${e.runId}\n${e.row}\n${e.field}`))].sort(
    (a, b) => Date.parse(b.at) - Date.parse(a.at) || b.runId.localeCompare(a.runId) || b.row - a.row,
  );
  const notes = (await marks.gaps(workspace)).map(
    (g) =>
      `history gap: ${g.rows} succeeded row(s) of run ${g.runId} had not reached the history database when ${g.reason} (${g.at}); ` +
      `changes they made to this record may be missing here`,
  );
  return { entries, notes };
}

/** historyReport's entries alone. */
export async function historyOf(options: HistoryOfOptions): Promise<HistoryEntry[]> {
  return (await historyReport(options)).entries;
}
