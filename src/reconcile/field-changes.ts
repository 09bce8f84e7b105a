import type { ListResource } from '../crm/index.js';
import type { FieldChanges } from '../runs/index.js';
import { canonicalFromRecord, canonicalFromRow, reportsField } from './compare.js';
import { COMPARABLE_FIELDS, type AnyRecord } from './resource-fields.js';

/**
 * What a write changed, field by field (RowResult.changes): per field sent, the record's value
 * before (canonical) and the value written. `before` is what the run read of the record:
 * - `listed` (a plan's or reconcile's before-values of the fields it changes): only those
 *   fields, where they differ from the value sent;
 * - `record` (the record's comparable values, as a list page showed them): every sent field
 *   that differs;
 * - undefined (a create, or a record the read did not find): every field, before unknown.
 * A field the CRM does not report (`position`) is kept with its before unknown (null).
 * `resent`: an earlier start of the row's job may have sent it, so a record read that already
 * holds the value sent may hold the row's own write: that field is kept with its before unknown,
 * never dropped as unchanged (the history of a worker killed mid-write keeps the row's change).
 * `answered`: the record as the write's answer showed it. The value after is the CRM's, not the
 * one sent: a CRM that normalises (collapsed spaces, an email's domain lower-cased) stores
 * another text, and `runs undo` compares the record now with what the write left. A field the
 * answer shows unchanged from its value before was not changed by the write, and is left out.
 */
export function fieldChanges(
  resource: ListResource,
  fields: Readonly<Record<string, unknown>>,
  before?: { listed: Readonly<Record<string, string>> } | { record: Readonly<Record<string, string>> },
  o: { resent?: boolean; answered?: AnyRecord } = {},
): FieldChanges {
  const comparable: readonly string[] = COMPARABLE_FIELDS[resource];
  const out: FieldChanges = {};
  for (const [field, value] of Object.entries(fields)) {
    if (field === 'id' || value === undefined) continue;
    const { answered } = o;
    const after =
      answered !== undefined && comparable.includes(field) && reportsField(field, answered)
        ? canonicalFromRecord(field, answered)
        : canonicalFromRow(field, value);
    if (!comparable.includes(field) || before === undefined) {
      out[field] = [null, after];
      continue;
    }
    const was = 'listed' in before ? before.listed[field] : (before.record[field] ?? '');
    if (was !== undefined && was !== after) out[field] = [was, after];
    else if (was === after && o.resent === true && 'record' in before) out[field] = [null, after];
  }
  return out;
}
