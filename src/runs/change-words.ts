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

/** Why `runs undo` leaves a field as it is (LeftField.reason), at its plan or at its write. */
export const CHANGED_SINCE_RUN = 'changed since the run';

/**
 * `name changed since the run: it is now "Ann B" (the run wrote "Anna")` (canonical values):
 * the one wording of a field an undo leaves, whether its plan saw the change or its write did.
 */
export function changedSinceRunWords(field: string, now: string, wrote: string): string {
  return `${field} ${CHANGED_SINCE_RUN}: it is now ${JSON.stringify(changeValue(now))} (the run wrote ${JSON.stringify(changeValue(wrote))})`;
}

/** `name "Ann" -> "Anna"; email (not known) -> "a@x.io"` */
export function changeWords(changes: FieldChanges | undefined): string {
  return Object.entries(changes ?? {})
    .map(
      ([field, [before, after]]) =>
        `${field} ${before === null ? '(not known)' : JSON.stringify(changeValue(before))} -> ${JSON.stringify(changeValue(after))}`,
    )
    .join('; ');
}

/** The export's before and after cells: JSON objects by field (`{}` when the row changed nothing). */
export function changeCells(changes: FieldChanges | undefined): { before: string; after: string } {
  const entries = Object.entries(changes ?? {});
  if (entries.length === 0) return { before: '', after: '' };
  return {
    before: JSON.stringify(Object.fromEntries(entries.map(([f, [b]]) => [f, b === null ? null : changeValue(b)]))),
    after: JSON.stringify(Object.fromEntries(entries.map(([f, [, a]]) => [f, changeValue(a)]))),
  };
}
