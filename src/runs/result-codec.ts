import { z } from 'zod';
import { CrmSyncError } from '../errors/index.js';
import type { FinalRowStatus, RowResult } from './run-types.js';

/*
 * A stored result is one hash value: a status character followed by compact JSON with
 * one-letter keys. The row number is the hash field, so it is not repeated; `at` is epoch
 * milliseconds (13 bytes instead of a 24-byte ISO string); succeeded and skipped rows keep no
 * `original`. The Lua scripts read only the first character, so they never decode JSON.
 */
const STATUS_CHAR = {
  succeeded: 's',
  skipped: 'k',
  invalid: 'i',
  failed: 'f',
  superseded: 'p',
  uncertain: 'u',
  drifted: 'd',
  cancelled: 'c',
} as const satisfies Record<FinalRowStatus, string>;
const CHAR_STATUS: Record<string, FinalRowStatus> = {
  s: 'succeeded',
  k: 'skipped',
  i: 'invalid',
  f: 'failed',
  p: 'superseded',
  u: 'uncertain',
  d: 'drifted',
  c: 'cancelled',
};

const StoredResultSchema = z.object({
  /** line */
  l: z.number().int().optional(),
  /** ref: the source row's key */
  r: z.string().optional(),
  /** recordId */
  d: z.string().optional(),
  /** httpStatus */
  h: z.number().int().optional(),
  /** code */
  c: z.string().optional(),
  /** message */
  m: z.string().optional(),
  /** field errors as [field, message] pairs */
  e: z.array(z.tuple([z.string(), z.string()])).optional(),
  /** original values */
  o: z.record(z.string(), z.string()).optional(),
  /** what a succeeded row sent, as a digest */
  v: z.string().optional(),
  /** changes: field -> [before (null: not known), after] */
  b: z.record(z.string(), z.tuple([z.string().nullable(), z.string()])).optional(),
  /** at, epoch ms */
  t: z.number(),
});
type StoredResult = z.infer<typeof StoredResultSchema>;

/** Rows an operator must look at (the problems index, exports of failed rows, `runs retry`). */
export function isProblem(status: FinalRowStatus): boolean {
  return status === 'failed' || status === 'invalid' || status === 'uncertain' || status === 'cancelled';
}

export function encodeResult(result: RowResult): string {
  const at = Date.parse(result.at);
  const stored: StoredResult = { t: Number.isFinite(at) ? at : Date.now() };
  if (result.line !== undefined) stored.l = result.line;
  if (result.ref !== undefined) stored.r = result.ref;
  if (result.recordId !== undefined) stored.d = result.recordId;
  if (result.httpStatus !== undefined) stored.h = result.httpStatus;
  if (result.code !== undefined) stored.c = result.code;
  if (result.message !== undefined) stored.m = result.message;
  if (result.errors !== undefined && result.errors.length > 0)
    stored.e = result.errors.map((e) => [e.field, e.message]);
  // Only rows someone may fix and re-import keep their source values: this is what lets a
  // million-row run fit in Redis.
  if ((isProblem(result.status) || result.code === 'ROW_WRITTEN_LATER') && result.original !== undefined)
    stored.o = result.original;
  if (result.status === 'succeeded' && result.sent !== undefined) stored.v = result.sent;
  if (result.status === 'succeeded' && result.changes !== undefined && Object.keys(result.changes).length > 0)
    stored.b = result.changes;
  return STATUS_CHAR[result.status] + JSON.stringify(stored);
}

export function decodeResult(row: number, value: string): RowResult {
  const status = CHAR_STATUS[value.charAt(0)];
  if (status === undefined)
    throw new CrmSyncError('RESULT_UNREADABLE', `stored result of row ${row} has an unknown status marker`);
  const stored = StoredResultSchema.parse(JSON.parse(value.slice(1)));
  const result: RowResult = { row, status, at: new Date(stored.t).toISOString() };
  if (stored.l !== undefined) result.line = stored.l;
  if (stored.r !== undefined) result.ref = stored.r;
  if (stored.d !== undefined) result.recordId = stored.d;
  if (stored.h !== undefined) result.httpStatus = stored.h;
  if (stored.c !== undefined) result.code = stored.c;
  if (stored.m !== undefined) result.message = stored.m;
  if (stored.e !== undefined) result.errors = stored.e.map(([field, message]) => ({ field, message }));
  if (stored.o !== undefined) result.original = stored.o;
  if (stored.v !== undefined) result.sent = stored.v;
  if (stored.b !== undefined) result.changes = stored.b;
  return result;
}
