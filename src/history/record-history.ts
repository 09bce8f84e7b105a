import { existsSync, readdirSync } from 'node:fs';
import {
  ArchivedRuns,
  archiveDir,
  changeValue,
  namedOrUndefined,
  type RunNames,
  type RunRecord,
  type RunResults,
  type RunStore,
} from '../runs/index.js';

/** One field change crm-sync made to a record. */
export interface HistoryEntry {
  /** When the row's result was stored (ISO). */
  at: string;
  runId: string;
  /** The run that this one undoes (`runs undo`), when it is an undo run. */
  undoOf?: string;
  row: number;
  line?: number;
  ref?: string;
  field: string;
  /** Display form; null: not known (a create, or a field the CRM does not report). */
  before: string | null;
  after: string;
  /**
   * With the names the run's rows gave for the ids (RunStore.names), as people read them:
   * `"Negotiation" → stg_1cbb…`. Absent when no id of the value was sent for a name.
   */
  beforeNamed?: string;
  afterNamed?: string;
  /** Where it was read: a run in Redis, its archive, or the PostgreSQL history. */
  from: 'redis' | 'archive' | 'postgres';
}

export interface RecordHistoryOptions {
  store: RunStore;
  /** The config's resultsDir: archived runs are read too. */
  resultsDir: string;
  workspace: string;
  recordId: string;
}

/**
 * Every change crm-sync made to one record, newest first: the workspace's runs in Redis and
 * its archived runs, each row that wrote the record, one entry per field (RowResult.changes).
 * It reads every result of the workspace's runs — seconds for millions of rows; a PostgreSQL
 * history (issue 34, item 4) answers from an index instead.
 */
export async function recordHistory(options: RecordHistoryOptions): Promise<HistoryEntry[]> {
  const { store, workspace, recordId } = options;
  const entries: HistoryEntry[] = [];
  const seen = new Set<string>();
  const PAGE = 200;
  for (let offset = 0; ; offset += PAGE) {
    const { runs } = await store.listRuns({ workspace, offset, limit: PAGE });
    for (const run of runs) {
      seen.add(run.id);
      await collect(store, run, recordId, 'redis', entries);
    }
    if (runs.length < PAGE) break;
  }
  const dir = archiveDir(options.resultsDir);
  if (existsSync(dir)) {
    const archived = new ArchivedRuns(options.resultsDir);
    for (const name of readdirSync(dir)) {
      const m = /^(.+)\.ndjson\.gz$/.exec(name);
      if (!m || seen.has(m[1]!)) continue;
      const run = await archived.requireRun(m[1]!);
      if (run.workspace === workspace) await collect(archived, run, recordId, 'archive', entries);
    }
  }
  return entries.sort((a, b) => Date.parse(b.at) - Date.parse(a.at) || b.runId.localeCompare(a.runId));
}

/** The record's changes in one run's results, appended to `out`. */
export async function collect(
  source: RunResults,
  run: RunRecord,
  recordId: string,
  from: HistoryEntry['from'],
  out: HistoryEntry[],
): Promise<void> {
  let names: RunNames | undefined;
  for await (const r of source.iterateResults(run.id)) {
    if (r.recordId !== recordId || r.changes === undefined || r.status !== 'succeeded') continue;
    names ??= await source.names(run.id);
    for (const [field, [before, after]] of Object.entries(r.changes))
      out.push({
        at: r.at,
        runId: run.id,
        ...(run.options.undoOf !== undefined ? { undoOf: run.options.undoOf } : {}),
        row: r.row,
        ...(r.line !== undefined ? { line: r.line } : {}),
        ...(r.ref !== undefined ? { ref: r.ref } : {}),
        field,
        before: before === null ? null : changeValue(before),
        after: changeValue(after),
        ...namedChange(names[field], before, after),
        from,
      });
  }
}

/** A change's values with the names its run's rows gave (HistoryEntry.beforeNamed/afterNamed), canonical in. */
export function namedChange(
  names: Readonly<Record<string, string>> | undefined,
  before: string | null,
  after: string,
): Pick<HistoryEntry, 'beforeNamed' | 'afterNamed'> {
  const b = namedOrUndefined(before, names);
  const a = namedOrUndefined(after, names);
  return { ...(b !== undefined ? { beforeNamed: b } : {}), ...(a !== undefined ? { afterNamed: a } : {}) };
}
