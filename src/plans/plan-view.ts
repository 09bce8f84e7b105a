import { once } from 'node:events';
import { stringify } from 'csv-stringify/sync';
import { canonicalFromRow, showCanonical } from '../reconcile/index.js';
import { csvDialectOf, stringifyOptions, type CsvDialect } from '../ingest/index.js';
import { escapeCsvCell, nameWords } from '../runs/index.js';
import type { PlanStore } from './plan-store.js';
import type { PlanAction, PlanChange, PlanRecord, PlanRow } from './plan-types.js';

/*
 * How a plan's rows read to people, the same in `plans show|export` and the dashboard's plan page:
 * per row its field changes (before → after, in the text form reconcile compares in), filters,
 * and the CSV.
 */

/**
 * A row's changes: an update's changed fields with the CRM's value when planned; a create's every
 * field. `name`: the cell's text when the value was sent for a name (shown `"Negotiation" → stg_1cbb…`).
 */
export function planChanges(
  row: PlanRow,
): Array<Required<Pick<PlanChange, 'field' | 'after'>> & { before: string; name?: string }> {
  const named = (field: string) => (row.names?.[field] !== undefined ? { name: row.names[field] } : {});
  if (row.action === 'create')
    return Object.entries(row.fields ?? {}).map(([field, v]) => ({
      field,
      before: '',
      after: showCanonical(canonicalFromRow(field, v)),
      ...named(field),
    }));
  return Object.entries(row.before ?? {}).map(([field, before]) => ({
    field,
    before: showCanonical(before ?? undefined),
    after: showCanonical(canonicalFromRow(field, row.fields?.[field])),
    ...named(field),
  }));
}

/** A change's new value as a person reads it: the name and the id it stands for, or the value quoted. */
export function afterWords(change: { after: string; name?: string }): string {
  return change.name !== undefined ? nameWords(change.name, change.after) : JSON.stringify(change.after);
}

/** afterWords unquoted when no name: the plan page's and the CSV's cell. */
export function afterCell(change: { after: string; name?: string }): string {
  return change.name !== undefined ? nameWords(change.name, change.after) : change.after;
}

export interface PlanRowFilter {
  action?: PlanAction | string | undefined;
  field?: string | undefined;
  /** Case-insensitive, in the record id, key, values and message. */
  text?: string | undefined;
}

export function planRowFilter(filter: PlanRowFilter): (row: PlanRow) => boolean {
  const text = filter.text?.toLowerCase();
  return (row) => {
    if (filter.action !== undefined && row.action !== filter.action) return false;
    if (filter.field !== undefined && !planChanges(row).some((c) => c.field === filter.field)) return false;
    if (text !== undefined && text !== '') {
      const hay = [
        row.recordId,
        row.key,
        row.ref,
        row.message,
        ...planChanges(row).flatMap((c) => [c.before, c.after, c.name]),
      ];
      if (!hay.some((h) => h?.toLowerCase().includes(text))) return false;
    }
    return true;
  };
}

export const PLAN_EXPORT_COLUMNS = ['row', 'line', 'action', 'record_id', 'key', 'field', 'before', 'after', 'message'];

/**
 * The plan as CSV, one line per field change (a row without changes: one line), cells
 * spreadsheet-safe; streamed bucket by bucket. Returns the lines written.
 */
export async function writePlanCsv(
  store: PlanStore,
  plan: PlanRecord,
  out: NodeJS.WritableStream,
  keep: (row: PlanRow) => boolean = () => true,
  given: Partial<CsvDialect> = {},
): Promise<number> {
  // Written as the plan's source file was (its delimiter, BOM, line ends), unless `given` says otherwise.
  const dialect = csvDialectOf(plan.dialect, given);
  const options = stringifyOptions(dialect, false);
  const line = (cells: string[]) => stringify([cells.map(escapeCsvCell)], options);
  const bom = dialect.bom ? '\ufeff' : '';
  if (!out.write(bom + line(PLAN_EXPORT_COLUMNS))) await once(out, 'drain');
  let lines = 0;
  for await (const r of store.rows(plan)) {
    if (!keep(r)) continue;
    const base = [String(r.row), r.line !== undefined ? String(r.line) : '', r.action, r.recordId ?? '', r.key ?? ''];
    const changes = planChanges(r);
    for (const c of changes.length > 0 ? changes : [{ field: '', before: '', after: '' }]) {
      if (!out.write(line([...base, c.field, c.before, afterCell(c), r.message ?? '']))) await once(out, 'drain');
      lines++;
    }
  }
  return lines;
}
