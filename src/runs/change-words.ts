import type { RunNames } from './run-names.js';
import type { FieldChanges } from './run-types.js';

/*
 * How a row's writes (RowResult.changes) read: `runs show`, the export's before/after columns,
 * `history`, the dashboard. Canonical values show tag sets with `;` (showCanonical's form).
 */

const LIST = '\u001e';

/** A canonical value as a person reads it; null: the value before is not known. */
export function changeValue(value: string | null): string {
  return value === null ? '(not known)' : value.replaceAll(LIST, ';');
}

/** An id sent for a name, as people read it: `"Negotiation" → stg_1cbb…` (plans, runs, history, undo). */
export function nameWords(name: string, id: string): string {
  return `${JSON.stringify(name)} → ${id}`;
}

/**
 * A canonical value, quoted, or with the names its ids were sent for (`names`: id → name, of
 * the value's field): `"Negotiation" → stg_1cbb…`; a tag list `"VIP" → tag_1; "Hot" → tag_2`
 * (an item without a name is its id). The one place a value becomes "name → id" for display.
 */
export function namedValueWords(value: string | null, names?: Readonly<Record<string, string>>): string {
  if (value === null) return '(not known)';
  const items = value === '' ? [] : value.split(LIST);
  if (names === undefined || !items.some((i) => names[i] !== undefined)) return JSON.stringify(changeValue(value));
  return items.map((i) => (names[i] !== undefined ? nameWords(names[i], i) : i)).join('; ');
}

/** namedValueWords when a name is known, else undefined (a display keeps its own form then). */
export function namedOrUndefined(value: string | null, names?: Readonly<Record<string, string>>): string | undefined {
  if (value === null || names === undefined) return undefined;
  return value.split(LIST).some((i) => names[i] !== undefined) ? namedValueWords(value, names) : undefined;
}

/** Why `runs undo` leaves a field as it is (LeftField.reason), at its plan or at its write. */
export const CHANGED_SINCE_RUN = 'changed since the run';

/**
 * `name changed since the run: it is now "Ann B" (the run wrote "Anna")` (canonical values):
 * the one wording of a field an undo leaves, whether its plan saw the change or its write did.
 */
export function changedSinceRunWords(field: string, now: string, wrote: string): string {
  return `${field} ${CHANGED_SINCE_RUN}: it is now ${JSON.stringify(changeValue(now))} (the run wrote ${JSON.stringify(changeValue(wrote))})`;
}

/** `name "Ann" -> "Anna"; email (not known) -> "a@x.io"; stage_id "stg_4" -> "Negotiation" → stg_1` */
export function changeWords(changes: FieldChanges | undefined, names: RunNames = {}): string {
  return Object.entries(changes ?? {})
    .map(
      ([field, [before, after]]) =>
        `${field} ${namedValueWords(before, names[field])} -> ${namedValueWords(after, names[field])}`,
    )
    .join('; ');
}

/**
 * The export's before and after cells: JSON objects by field (`{}` when the row changed nothing);
 * a value sent for a name reads `"Negotiation" → stg_1cbb…` (the run's names).
 */
export function changeCells(
  changes: FieldChanges | undefined,
  names: RunNames = {},
): { before: string; after: string } {
  const entries = Object.entries(changes ?? {});
  if (entries.length === 0) return { before: '', after: '' };
  const cell = (f: string, v: string) => namedOrUndefined(v, names[f]) ?? changeValue(v);
  return {
    before: JSON.stringify(Object.fromEntries(entries.map(([f, [b]]) => [f, b === null ? null : cell(f, b)]))),
    after: JSON.stringify(Object.fromEntries(entries.map(([f, [, a]]) => [f, cell(f, a)]))),
  };
}
