import { stringify } from 'csv-stringify/sync';
import { DEFAULT_CSV_DIALECT, stringifyOptions, type CsvDialect } from '../ingest/index.js';
import { describeError, escapeCsvCell, type RowResult } from '../runs/index.js';
import { showCanonical } from './compare.js';
import type { PlanAction, PlannedRow } from './plan-rows.js';

/** `held_back`: changes a mapping's write policy kept from being sent, with why (write-policy.ts). */
export const PLAN_CSV_COLUMNS = [
  'row',
  'line',
  'action',
  'record_id',
  'key',
  'changes',
  'message',
  'held_back',
] as const;

export type PlanCounts = Record<PlanAction, number>;

export function emptyPlanCounts(): PlanCounts {
  return { update: 0, create: 0, skip: 0, 'not-found': 0, ambiguous: 0, invalid: 0 };
}

function messageOf(row: PlannedRow): string {
  if (row.outcome) return row.outcome.message;
  if (row.errors)
    return describeError({ row: row.row, status: 'invalid', errors: row.errors, at: '' } satisfies RowResult);
  return '';
}

/** One CSV line (with its line end) for a planned row in the source's dialect; cells are spreadsheet-safe. */
export function planCsvLine(row: PlannedRow, dialect: CsvDialect = DEFAULT_CSV_DIALECT): string {
  const changes = (row.changes ?? [])
    .map((c) => `${c.field}: ${showCanonical(c.current)} -> ${showCanonical(c.wanted)}`)
    .join('; ');
  const held = (row.held ?? [])
    .map((h) => `${h.field}: keeps ${showCanonical(h.current)}, not ${showCanonical(h.wanted)} (${h.reason})`)
    .join('; ');
  return stringify(
    [
      [
        String(row.row),
        String(row.line),
        row.action,
        row.recordId ?? '',
        row.key ?? '',
        changes,
        messageOf(row),
        held,
      ].map(escapeCsvCell),
    ],
    stringifyOptions(dialect, false),
  );
}

/** The header line, after a BOM when the dialect has one (the file's start). */
export function planCsvHeader(dialect: CsvDialect = DEFAULT_CSV_DIALECT): string {
  return (dialect.bom ? '\ufeff' : '') + stringify([[...PLAN_CSV_COLUMNS]], stringifyOptions(dialect, false));
}

/** `update 3, create 0, skip 20, not-found 1, ambiguous 0, invalid 1` */
export function formatPlanCounts(counts: PlanCounts): string {
  return (Object.entries(counts) as Array<[PlanAction, number]>).map(([k, v]) => `${k} ${v}`).join(', ');
}
