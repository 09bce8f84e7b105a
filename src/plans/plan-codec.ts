import { CrmSyncError } from '../errors/index.js';
import type { PlanAction, PlanRow } from './plan-types.js';

/*
 * A stored plan row is one hash value in a bucket of 100 rows (the row number is the field, not
 * repeated): an action character and compact JSON with one-letter keys, empty parts left out.
 * An update of one field is about 60–90 bytes; Redis keeps small buckets as listpacks.
 */
const ACTION_CHAR = {
  update: 'u',
  create: 'c',
  skip: 's',
  'not-found': 'n',
  ambiguous: 'a',
  invalid: 'i',
} as const satisfies Record<PlanAction, string>;
const CHAR_ACTION = Object.fromEntries(Object.entries(ACTION_CHAR).map(([a, c]) => [c, a])) as Record<
  string,
  PlanAction
>;

interface Stored {
  l?: number;
  r?: string;
  d?: string;
  k?: string;
  f?: Record<string, unknown>;
  b?: Record<string, string | null>;
  x?: string;
  p?: number;
  c?: string;
  m?: string;
  n?: Record<string, string>;
}

export function encodePlanRow(row: PlanRow): string {
  const s: Stored = {};
  if (row.line !== undefined) s.l = row.line;
  if (row.ref !== undefined) s.r = row.ref;
  if (row.recordId !== undefined) s.d = row.recordId;
  if (row.key !== undefined && row.key !== '') s.k = row.key;
  if (row.fields !== undefined) s.f = row.fields;
  if (row.before !== undefined) s.b = row.before;
  if (row.match !== undefined) s.x = row.match;
  if (row.place !== undefined) s.p = row.place;
  if (row.names !== undefined) s.n = row.names;
  if (row.code !== undefined) s.c = row.code;
  if (row.message !== undefined && row.message !== '') s.m = row.message;
  return ACTION_CHAR[row.action] + JSON.stringify(s);
}

export function decodePlanRow(row: number, value: string): PlanRow {
  const action = CHAR_ACTION[value.charAt(0)];
  if (action === undefined) throw new CrmSyncError('RESULT_UNREADABLE', `stored plan row ${row} has an unknown action`);
  const s = JSON.parse(value.slice(1)) as Stored;
  const out: PlanRow = { row, action };
  if (s.l !== undefined) out.line = s.l;
  if (s.r !== undefined) out.ref = s.r;
  if (s.d !== undefined) out.recordId = s.d;
  if (s.k !== undefined) out.key = s.k;
  if (s.f !== undefined) out.fields = s.f;
  if (s.b !== undefined) out.before = s.b;
  if (s.x !== undefined) out.match = s.x;
  if (s.p !== undefined) out.place = s.p;
  if (s.n !== undefined) out.names = s.n;
  if (s.c !== undefined) out.code = s.c;
  if (s.m !== undefined) out.message = s.m;
  return out;
}
