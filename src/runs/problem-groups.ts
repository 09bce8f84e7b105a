import { createHash } from 'node:crypto';
import { DEFAULTS, resolveSettings } from '../config/index.js';
import { isPermanentCode } from '../crm/light.js';
import { describeError } from './results-csv.js';
import type { RunStore } from './run-store.js';
import type { FinalRowStatus, RowResult } from './run-types.js';

/** Result of a row the problem index holds. */
export type ProblemStatus = Extract<FinalRowStatus, 'failed' | 'invalid' | 'uncertain' | 'cancelled'>;

export interface ProblemGroup {
  /** Stable short id of (status, code, normalised message): the same cause always has the same key. */
  key: string;
  status: ProblemStatus;
  /** The error code, '' when the row has none. */
  code: string;
  /** The error text with ids, numbers and quoted values masked (normaliseMessage). */
  message: string;
  /**
   * Failed rows whose error the worker classes permanent (a 404, a 4xx refusal, an off-spec
   * answer: isPermanentCode): sent again unchanged they fail again, so a retry is no remedy.
   */
  permanent: boolean;
  /** Rows in the group among the rows looked at. */
  count: number;
  /** The first rows of the group, in row order (at most `sampleRows`). */
  rows: number[];
}

export interface GroupProblemsOptions {
  /** Problem rows looked at, at most, in row order. Default DEFAULTS.runs (100,000). */
  scanLimit?: number;
  /** Distinct groups kept; rows of further causes are counted in `otherRows`. Default DEFAULTS.runs (200). */
  maxGroups?: number;
  /** Row numbers kept per group. Default DEFAULTS.runs (5). */
  sampleRows?: number;
  /** Stops the scan between batches (a client that went away). */
  signal?: AbortSignal;
}

export interface ProblemGroups {
  /** Largest first; equal counts by first row. */
  groups: ProblemGroup[];
  /** Problem rows looked at. */
  scanned: number;
  /** False when `scanLimit` stopped the scan before the end of the index. */
  complete: boolean;
  /** Rows whose cause did not fit in `maxGroups`. */
  otherRows: number;
}

/*
 * Masks, applied in order. Quoted text and e-mail addresses go first (they may contain digits),
 * then CRM-style ids (`stg_abc`, `del_x9`: a short prefix, `_`, a token; not a field name, which
 * a colon follows), then any word holding a digit (amounts, dates, other ids): what is left is the
 * wording of the cause, which is what rows of one cause share.
 */
const QUOTED = /"[^"]*"|“[^”]*”|‘[^’]*’|'[^']*'/g;
/**
 * Quoted text that is the message's own wording, not a row's value: a sign (`it has no "@"`,
 * `a misplaced "."`) or a literal the message names (`must be "true" or "false"`).
 */
function ownQuote(quoted: string): boolean {
  const inner = quoted.slice(1, -1);
  return (inner !== '' && !/[\p{L}\p{N}]/u.test(inner)) || /^(true|false|\.com)$/.test(inner);
}
const MASKS: Array<[RegExp, string]> = [
  [/[^\s@,;:()]+@[^\s@,;:()]+\.[a-z]{2,}/gi, '<email>'],
  [/\b[a-z]{2,5}_[A-Za-z0-9]+\b(?!\s*:)/g, '#'],
  [/[\p{L}\p{N}_.\-/]*\p{N}[\p{L}\p{N}_.\-/]*/gu, '#'],
];

/** The wording of an error with its values masked: `deal deal_8f3 not found` → `deal # not found`. */
export function normaliseMessage(text: string): string {
  let out = text.replace(QUOTED, (q) => (ownQuote(q) ? q : '"…"'));
  for (const [pattern, mask] of MASKS) out = out.replace(pattern, mask);
  return out.replace(/\s+/g, ' ').trim();
}

const REFERENCE_CODES: ReadonlySet<string> = new Set(['REFERENCE_UNKNOWN', 'REFERENCE_AMBIGUOUS']);

/** The group a problem row belongs to (its key is what `?group=` and the group routes take). */
export function problemGroupOf(
  result: RowResult,
): Pick<ProblemGroup, 'key' | 'status' | 'code' | 'message' | 'permanent'> {
  const status: ProblemStatus =
    result.status === 'invalid' || result.status === 'uncertain' || result.status === 'cancelled'
      ? result.status
      : 'failed';
  const code = result.code ?? '';
  // A name nothing resolved groups by its column and value ("Negotiaton" in 212 rows is one
  // group, "Closng" another): its message is the same for every row naming it, so it is not masked.
  const message = REFERENCE_CODES.has(code) ? describeError(result) : normaliseMessage(describeError(result));
  const key = createHash('sha1').update(`${status}\u0000${code}\u0000${message}`).digest('hex').slice(0, 12);
  return { key, status, code, message, permanent: status === 'failed' && isPermanentCode(code) };
}

/**
 * A run's failed, invalid and uncertain rows grouped by cause (status, code, normalised
 * message), largest group first. Read-only; reads the problem index in row order in batches, so
 * memory is bounded by `maxGroups` × `sampleRows` whatever the run's size, and the work by
 * `scanLimit` (the answer says when it stopped early).
 */
export async function groupProblems(
  store: RunStore,
  runId: string,
  options: GroupProblemsOptions = {},
): Promise<ProblemGroups> {
  const { scanLimit, maxGroups, sampleRows } = resolveSettings(options, {
    scanLimit: DEFAULTS.runs.groupScanRows,
    maxGroups: DEFAULTS.runs.maxGroups,
    sampleRows: DEFAULTS.runs.groupSampleRows,
  });
  const groups = new Map<string, ProblemGroup>();
  let scanned = 0;
  let otherRows = 0;
  let complete = true;
  for await (const result of store.iterateResults(runId, { problemsOnly: true })) {
    if (scanned >= scanLimit) {
      complete = false;
      break;
    }
    if (scanned % 1000 === 0 && options.signal?.aborted)
      throw options.signal.reason instanceof Error ? options.signal.reason : new Error('grouping stopped');
    scanned++;
    const cause = problemGroupOf(result);
    let group = groups.get(cause.key);
    if (group === undefined) {
      if (groups.size >= maxGroups) {
        otherRows++;
        continue;
      }
      group = { ...cause, count: 0, rows: [] };
      groups.set(cause.key, group);
    }
    group.count++;
    if (group.rows.length < sampleRows) group.rows.push(result.row);
  }
  // A group's first sampled row orders ties: every group has one (its first row is always sampled).
  const sorted = [...groups.values()].sort((a, b) => b.count - a.count || a.rows[0]! - b.rows[0]!);
  return { groups: sorted, scanned, complete, otherRows };
}

/** Rows of the run's problem index that `match` accepts, in row order (for a retry of a group). */
export async function problemRowsWhere(
  store: RunStore,
  runId: string,
  match: (result: RowResult) => boolean,
  limit = 1_000_000,
): Promise<number[]> {
  const rows: number[] = [];
  for await (const result of store.iterateResults(runId, { problemsOnly: true })) {
    if (!match(result)) continue;
    rows.push(result.row);
    if (rows.length >= limit) break;
  }
  return rows;
}
