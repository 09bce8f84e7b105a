import { problemGroupOf, type ProblemStatus, type RowResult, type RunStore } from '../runs/index.js';
import { clientGone } from './work-limiter.js';

export interface ProblemSearchQuery {
  /** Which problem rows are wanted (problemFilter builds it from the page's filters). */
  match: (result: RowResult) => boolean;
  /** Position in the run's problem index to start at (the previous answer's `next`). */
  from: number;
  /** Matches per answer. */
  limit: number;
  /** Problem rows looked at per answer, at most. */
  scanLimit: number;
  /** Aborted when the client goes away: the scan stops at the next batch. */
  signal: AbortSignal;
}

export interface ProblemSearchResult {
  rows: RowResult[];
  /** Problem rows of the run (the whole index). */
  problems: number;
  /** Positions looked at: [from, to). */
  scanned: { from: number; to: number };
  /** Where to go on from, or null when the end of the index was reached. */
  next: number | null;
}

/**
 * Rows read and decoded per step. Decoding is synchronous (about 10–20 µs a row), so a step
 * holds the event loop for a few milliseconds at most, and each search yields between steps:
 * probes and page loads get their turn while searches run.
 */
const BATCH = 200;

/** The run page's problem filters; '' or undefined = any. */
export interface ProblemFilter {
  /** Text in the error message, code or field errors (any case). */
  q?: string;
  result?: ProblemStatus;
  /** An error group's key (problemGroupOf). */
  group?: string;
}

export function isFiltered(f: ProblemFilter): boolean {
  return Boolean(f.q || f.result || f.group);
}

export function problemFilter(f: ProblemFilter): (result: RowResult) => boolean {
  const needle = f.q?.toLowerCase() ?? '';
  return (r) =>
    (needle === '' || matchesProblem(r, needle)) &&
    (f.result === undefined || r.status === f.result) &&
    (f.group === undefined || problemGroupOf(r).key === f.group);
}

export function matchesProblem(result: RowResult, needle: string): boolean {
  const haystack = [
    result.message ?? '',
    result.code ?? '',
    ...(result.errors ?? []).map((e) => `${e.field}: ${e.message}`),
  ];
  return haystack.some((text) => text.toLowerCase().includes(needle));
}

/**
 * One bounded step of a text search over a run's failed, invalid and uncertain rows: it reads
 * the problem index in batches from `from`, stops at `limit` matches or after `scanLimit` rows,
 * and says where to go on. The cost of one request is bounded whatever the run's size; the
 * total number of matches is not known (that would need the whole scan).
 */
export async function searchProblems(
  store: RunStore,
  runId: string,
  q: ProblemSearchQuery,
): Promise<ProblemSearchResult> {
  const rows: RowResult[] = [];
  let at = q.from;
  let problems = -1;
  const end = q.from + q.scanLimit;
  while (at < end && rows.length < q.limit) {
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (q.signal.aborted)
      // Before the first batch the run's size is not known yet (-1): say so instead of "of -1".
      throw clientGone(
        problems === -1
          ? 'search stopped before reading a row'
          : `search stopped after ${at - q.from} of ${problems} problem rows`,
      );
    const size = Math.min(BATCH, end - at);
    const batch = await store.problems(runId, { offset: at, limit: size });
    problems = batch.total;
    let used = size;
    for (let i = 0; i < batch.rows.length; i++) {
      const row = batch.rows[i]!;
      if (!q.match(row)) continue;
      rows.push(row);
      if (rows.length >= q.limit) {
        used = i + 1;
        break;
      }
    }
    at += used;
    if (at >= problems) break;
  }
  if (problems === -1) problems = (await store.problems(runId, { limit: 0 })).total;
  const to = Math.min(at, problems);
  return { rows, problems, scanned: { from: Math.min(q.from, problems), to }, next: to < problems ? to : null };
}
