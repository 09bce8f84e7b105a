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

function base(place: RowPlace): Pick<RowResult, 'row' | 'line' | 'ref' | 'at'> {
  return {
    row: place.row,
    ...(place.line !== undefined ? { line: place.line } : {}),
    ...(place.ref !== undefined ? { ref: place.ref } : {}),
    at: new Date().toISOString(),
  };
}

/** Where a row sits in its source (row, line, key), as results and queued rows carry it. */
export function placeOf<L extends number | undefined>(r: {
  row: number;
  line: L;
  ref?: string | undefined;
}): { row: number; line: L; ref?: string } {
  return { row: r.row, line: r.line, ...(r.ref !== undefined ? { ref: r.ref } : {}) };
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
  return {
    ...base(place),
    status: 'succeeded',
    ...(recordId !== undefined ? { recordId } : {}),
    ...(message ? { message } : {}),
    ...(sent !== undefined ? { sent } : {}),
    ...(changes !== undefined && Object.keys(changes).length > 0 ? { changes } : {}),
  };
}

export function skipped(place: RowPlace, message: string, recordId?: string): RowResult {
  return { ...base(place), status: 'skipped', message, ...(recordId !== undefined ? { recordId } : {}) };
}

/** A row that does not satisfy the operation's schema: never sent; exported with its values. */
export function invalid(place: RowPlace, errors: FieldError[], original: Original, code = 'ROW_INVALID'): RowResult {
  const message = errors.map((e) => `${e.field}: ${e.message}`).join('; ') || 'invalid row';
  return { ...base(place), status: 'invalid', code, message, errors, original };
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
  return {
    ...base(place),
    status: 'failed',
    ...(detail.httpStatus !== undefined ? { httpStatus: detail.httpStatus } : {}),
    ...(detail.code !== undefined ? { code: detail.code } : {}),
    message: detail.message,
    ...(detail.recordId !== undefined ? { recordId: detail.recordId } : {}),
    ...(original ? { original } : {}),
  };
}

/** Not sent: the run was cancelled (`runs cancel`). Exported and retryable. */
export function cancelled(place: RowPlace, reason: string, original: Original | undefined): RowResult {
  return {
    ...base(place),
    status: 'cancelled',
    code: 'RUN_CANCELLED',
    message: `not sent: ${reason}`,
    ...(original ? { original } : {}),
  };
}

/** Not sent: the run was aborted (a nightly sync's maxFailures, its lock lost). A failure. */
export function aborted(place: RowPlace, reason: string, original: Original | undefined): RowResult {
  return failed(place, { code: 'RUN_ABORTED', message: `not sent: ${reason}` }, original);
}

/** Not sent: later rows wrote every field this row would change, and were applied first. */
export function superseded(place: RowPlace, message: string): RowResult {
  return { ...base(place), status: 'superseded', code: 'ROW_SUPERSEDED', message };
}

/**
 * Not sent again by a retry: later runs had written every field the row would change. Keeps the
 * row's values, so `runs retry --resend-superseded` can still send it as a new write.
 */
export function writtenLater(place: RowPlace, message: string, original: Original): RowResult {
  return { ...base(place), status: 'superseded', code: 'ROW_WRITTEN_LATER', message, original };
}

/** A create whose outcome could not be established; never re-sent blindly. */
export function uncertain(place: RowPlace, code: string, message: string, original: Original): RowResult {
  return { ...base(place), status: 'uncertain', code, message, original };
}

/**
 * Not sent: a row of an applied plan whose record no longer held the plan's before-values of the
 * fields it changes; `message` names the CRM's current values. Re-plan to send it (`crm-sync plan`).
 */
export function drifted(place: RowPlace, message: string, recordId?: string): RowResult {
  return {
    ...base(place),
    status: 'drifted',
    code: 'ROW_DRIFTED',
    message,
    ...(recordId !== undefined ? { recordId } : {}),
  };
}
