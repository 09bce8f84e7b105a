import { readdirSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULTS } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import { STDIN_SPOOL_DIR } from '../ingest/index.js';
import { archiveRun } from './run-archive.js';
import type { RunStore } from './run-store.js';
import type { RunRecord } from './run-types.js';

export interface PruneOptions {
  store: RunStore;
  /** Where archives go (`<resultsDir>/archive`) and whose old failed-rows files are removed. */
  resultsDir: string;
  /** Ended runs created longer ago than this are archived and removed from Redis. */
  olderThanMs: number;
  /** Name what would go, change nothing. Default false. */
  dryRun?: boolean;
  /** "Now", for benchmarks that simulate nights. Default Date.now(). */
  now?: number;
  /** At most this many runs per call (the housekeeping comes back for the rest). Default DEFAULTS.retention (1000). */
  limit?: number;
  /** Called with each run about to be removed, after its archive is written (the history's last catch-up). */
  beforeDelete?: (run: RunRecord) => Promise<void>;
}

export interface PruneSummary {
  /** Runs archived and removed (or that would be, in a dry run). */
  runs: string[];
  /** Result rows written to archives. */
  archivedRows: number;
  /** Runs old enough but still running or blocked: left alone. */
  kept: string[];
  /** Failed-rows and export files removed from resultsDir. */
  files: string[];
}

/**
 * Retention: ended runs (completed, failed, cancelled) created before the cutoff are archived —
 * their full results to a compressed file under resultsDir, so `runs show/export` still work —
 * and then removed from Redis; CSV files in resultsDir older than the cutoff go too. Runs still
 * running or blocked are never touched. Safe to repeat and to run from several workers at once
 * (an archive is rewritten from the same data; deleteRun is idempotent).
 */
export async function pruneRuns(options: PruneOptions): Promise<PruneSummary> {
  const { store, resultsDir } = options;
  if (!Number.isFinite(options.olderThanMs) || options.olderThanMs <= 0)
    throw new CrmSyncError('USAGE', `a retention is a positive duration, got ${options.olderThanMs} ms`);
  const cutoff = (options.now ?? Date.now()) - options.olderThanMs;
  const summary: PruneSummary = { runs: [], archivedRows: 0, kept: [], files: [] };
  const keptSources = new Set<string>();
  for (const id of await store.runIdsCreatedBefore(cutoff, options.limit ?? DEFAULTS.retention.pruneBatch)) {
    const run = await store.getRun(id);
    if (run === null) continue;
    if (run.status === 'running' || run.status === 'blocked') {
      summary.kept.push(id);
      keptSources.add(resolve(run.source));
      continue;
    }
    summary.runs.push(id);
    if (options.dryRun) continue;
    const { rows } = await archiveRun(store, id, resultsDir);
    summary.archivedRows += rows;
    await options.beforeDelete?.(run);
    await store.deleteRun(id);
  }
  summary.files = [
    ...pruneFiles(resultsDir, cutoff, options.dryRun ?? false, (name) => name.endsWith('.csv')),
    // Spooled stdin of `import -` (src/ingest/stdin-spool.ts): the source of runs now archived,
    // not of one still running or blocked (its resume reads the copy).
    ...pruneFiles(
      join(resultsDir, STDIN_SPOOL_DIR),
      cutoff,
      options.dryRun ?? false,
      (name) => !keptSources.has(resolve(resultsDir, STDIN_SPOOL_DIR, name)),
    ),
  ];
  return summary;
}

/**
 * Files directly in `dir` older than the cutoff that `wanted` names: CSV files in resultsDir
 * (failed-rows files of nightly syncs, exports), and spooled stdin.
 */
function pruneFiles(dir: string, cutoffMs: number, dryRun: boolean, wanted: (name: string) => boolean): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!wanted(name)) continue;
    const path = join(dir, name);
    try {
      const st = statSync(path);
      if (!st.isFile() || st.mtimeMs >= cutoffMs) continue;
      if (!dryRun) rmSync(path, { force: true });
      removed.push(path);
    } catch {
      // Gone meanwhile (another worker's housekeeping): nothing to do.
    }
  }
  return removed;
}

/** `30d`, `12h`, `90m`, or a number of days. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(d|h|m)?$/.exec(text.trim());
  if (!m) throw new CrmSyncError('USAGE', `not a duration: "${text}" (e.g. 30d, 12h, 90m)`);
  const n = Number(m[1]);
  const unit = m[2] ?? 'd';
  return n * (unit === 'd' ? 86_400_000 : unit === 'h' ? 3_600_000 : 60_000);
}
