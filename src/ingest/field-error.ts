/** Codes a cell naming what the CRM's references (or a lookup file, a value map) do not know gets its row. */
export type ReferenceCode = 'REFERENCE_UNKNOWN' | 'REFERENCE_AMBIGUOUS';

/** One reason a row is invalid, named by the source column (with its API field when they differ). */
export interface FieldError {
  field: string;
  message: string;
  /** A name, lookup key or value that resolved to no id or to several: the row's code, and how summaries group it. */
  code?: ReferenceCode;
  /** With `code`: the cell's text (a tag list's item). */
  value?: string;
  /** With `code`: the nearest known name (did-you-mean). */
  suggestion?: string;
}

/** Field name for errors about the row as a whole (e.g. "needs at least one field"). */
export const ROW_FIELD = '(row)';

/** A row's code from its errors: a reference code when every error is one (the same code), else ROW_INVALID. */
export function rowCodeOf(errors: readonly FieldError[]): 'ROW_INVALID' | ReferenceCode {
  const first = errors[0]?.code;
  return first !== undefined && errors.every((e) => e.code === first) ? first : 'ROW_INVALID';
}
