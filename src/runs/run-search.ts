import { basename } from 'node:path';
import { DEFAULTS } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import type { ListRunsQuery, RunRecord } from './run-types.js';

/** A page of the runs list, newest first (RunStore.listRuns, or a scoped view of it). */
export type ListRuns = (
  query: ListRunsQuery & { offset: number; limit: number },
) => Promise<{ runs: RunRecord[]; total: number }>;

export interface SearchRunsQuery {
  /** Text looked for, in any case, in the run id, the source file's name and the sync name. */
  text: string;
  /** The list's own filters (status, workspace, sync), applied before the text. */
  filters?: Omit<ListRunsQuery, 'offset' | 'limit'>;
  /** Matches to skip (paging) and to return. */
  offset: number;
  limit: number;
  /** Newest runs looked through, at most. Default DEFAULTS.runs (5,000). */
  scanLimit?: number;
  /** Aborted when nobody waits for the answer any more (the dashboard's client went): the search stops before its next page. */
  signal?: AbortSignal;
}

export interface SearchRunsResult {
  runs: RunRecord[];
  /** Matches among the runs looked through. */
  total: number;
  /** Runs looked through; less than the list when `scanLimit` stopped the search. */
  scanned: number;
  complete: boolean;
}

const PAGE = 500;

export function runMatches(run: RunRecord, needle: string): boolean {
  return [run.id, basename(run.source), run.source, run.syncName ?? '', run.options.label ?? ''].some((v) =>
    v.toLowerCase().includes(needle),
  );
}

/**
 * Runs whose id, file name or sync name contains the text, newest first. The run indexes have no
 * text index, so this pages through the (filtered) list, at most `scanLimit` runs per call: the
 * cost is bounded and the answer says when older runs were not looked at.
 */
export async function searchRuns(list: ListRuns, q: SearchRunsQuery): Promise<SearchRunsResult> {
  const needle = q.text.trim().toLowerCase();
  const scanLimit = q.scanLimit ?? DEFAULTS.runs.searchScanRuns;
  const runs: RunRecord[] = [];
  let total = 0;
  let scanned = 0;
  let listed = 0;
  while (scanned < scanLimit) {
    if (q.signal?.aborted) {
      throw new CrmSyncError(
        'CLIENT_GONE',
        `the client closed the connection; run search stopped ${scanned === 0 ? 'before reading a run' : `after ${scanned} of ${listed} runs`}`,
      );
    }
    const page = await list({ ...q.filters, offset: scanned, limit: Math.min(PAGE, scanLimit - scanned) });
    listed = page.total;
    for (const run of page.runs) {
      if (!runMatches(run, needle)) continue;
      if (total >= q.offset && runs.length < q.limit) runs.push(run);
      total++;
    }
    scanned += page.runs.length;
    if (page.runs.length === 0 || scanned >= page.total) break;
  }
  return { runs, total, scanned, complete: scanned >= listed };
}
