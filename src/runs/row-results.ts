import type { FieldChanges, FieldError, RowResult } from './run-types.js';

/*
 * The one place a row's result is built, so every path that ends a row (producer, workers,
 * sweep, cancel, abort) says the same thing the same way. Each takes the row's place in the
 * source; `at` is always now.
 */

export interface RowPlace {
  row: number;
  /** 1-based line in the source (omitted when unknown). */
  line?: number | undefined;
  /** The source row's key, when its source names rows by a key column (a database query). */
  ref?: string | undefined;
}

type Original = Record<string, string>;

/** The last `at` made, and its millisecond: rows finishing in the same millisecond share it. */
let lastAt = { ms: 0, iso: '' };

function nowIso(): string {
  const ms = Date.now();
  if (ms !== lastAt.ms) lastAt = { ms, iso: new Date(ms).toISOString() };
  return lastAt.iso;
}

/**
 * The result's common part. Every builder sets its other keys one by one, never by spreading:
 * an object spread of results whose keys vary costs ~1–4 µs a row on Node 20, against ~0.2 µs
 * key by key (bench/RESULTS.md, "The ratio back to where it was before issue 32"), and every
 * row of a run builds one.
 */
function base(place: RowPlace, status: RowResult['status']): RowResult {
  const out: RowResult = { row: place.row, status, at: nowIso() };
  if (place.line !== undefined) out.line = place.line;
  if (place.ref !== undefined) out.ref = place.ref;
  return out;
}

/** Where a row sits in its source (row, line, key), as results and queued rows carry it. */
export function placeOf<L extends number | undefined>(r: {
  row: number;
  line: L;
  ref?: string | undefined;
}): { row: number; line: L; ref?: string } {
  const out: { row: number; line: L; ref?: string } = { row: r.row, line: r.line };
  if (r.ref !== undefined) out.ref = r.ref;
  return out;
}

/**
 * `sent`: the digest of the fields the row sent (src/reconcile/sent-digest.ts), kept for `verify`;
 * `changes`: what it wrote over what, field by field (RowResult.changes), kept for `runs undo`.
 */
export function succeeded(
  place: RowPlace,
  recordId: string | undefined,
  message?: string,
  sent?: string,
  changes?: FieldChanges,
): RowResult {
  const out = base(place, 'succeeded');
  if (recordId !== undefined) out.recordId = recordId;
  if (message) out.message = message;
  if (sent !== undefined) out.sent = sent;
  if (changes !== undefined && Object.keys(changes).length > 0) out.changes = changes;
  return out;
}

export function skipped(place: RowPlace, message: string, recordId?: string): RowResult {
  const out = base(place, 'skipped');
  out.message = message;
  if (recordId !== undefined) out.recordId = recordId;
  return out;
}

/** A row that does not satisfy the operation's schema: never sent; exported with its values. */
export function invalid(place: RowPlace, errors: FieldError[], original: Original, code = 'ROW_INVALID'): RowResult {
  const out = base(place, 'invalid');
  out.code = code;
  out.message = errors.map((e) => `${e.field}: ${e.message}`).join('; ') || 'invalid row';
  out.errors = errors;
  out.original = original;
  return out;
}

export interface FailureDetail {
  /** A code from src/errors/error-codes.ts (omitted when the failure has none). */
  code?: string | undefined;
  message: string;
  httpStatus?: number | undefined;
  recordId?: string | undefined;
}

/** A final failure; `original` is kept so the row can be exported, fixed and retried. */
export function failed(place: RowPlace, detail: FailureDetail, original: Original | undefined): RowResult {
  const out = base(place, 'failed');
  if (detail.httpStatus !== undefined) out.httpStatus = detail.httpStatus;
  if (detail.code !== undefined) out.code = detail.code;
  out.message = detail.message;
  if (detail.recordId !== undefined) out.recordId = detail.recordId;
  if (original) out.original = original;
  return out;
}

/** Not sent: the run was cancelled (`runs cancel`). Exported and retryable. */
export function cancelled(place: RowPlace, reason: string, original: Original | undefined): RowResult {
  const out = base(place, 'cancelled');
  out.code = 'RUN_CANCELLED';
  out.message = `not sent: ${reason}`;
  if (original) out.original = original;
  return out;
}

/** Not sent: the run was aborted (a nightly sync's maxFailures, its lock lost). A failure. */
export function aborted(place: RowPlace, reason: string, original: Original | undefined): RowResult {
  return failed(place, { code: 'RUN_ABORTED', message: `not sent: ${reason}` }, original);
}

/** Not sent: later rows wrote every field this row would change, and were applied first. */
export function superseded(place: RowPlace, message: string): RowResult {
  return coded(base(place, 'superseded'), 'ROW_SUPERSEDED', message);
}

/**
 * Not sent again by a retry: later runs had written every field the row would change. Keeps the
 * row's values, so `runs retry --resend-superseded` can still send it as a new write.
 */
export function writtenLater(place: RowPlace, message: string, original: Original): RowResult {
  return coded(base(place, 'superseded'), 'ROW_WRITTEN_LATER', message, original);
}

/** A create whose outcome could not be established; never re-sent blindly. */
export function uncertain(place: RowPlace, code: string, message: string, original: Original): RowResult {
  return coded(base(place, 'uncertain'), code, message, original);
}

/**
 * Not sent: a row of an applied plan whose record no longer held the plan's before-values of the
 * fields it changes; `message` names the CRM's current values. Re-plan to send it (`crm-sync plan`).
 */
export function drifted(place: RowPlace, message: string, recordId?: string): RowResult {
  const out = coded(base(place, 'drifted'), 'ROW_DRIFTED', message);
  if (recordId !== undefined) out.recordId = recordId;
  return out;
}

function coded(out: RowResult, code: string, message: string, original?: Original): RowResult {
  out.code = code;
  out.message = message;
  if (original) out.original = original;
  return out;
}
