/** One reason a row is invalid, named by the source column (with its API field when they differ). */
export interface FieldError {
  field: string;
  message: string;
}

/** Field name for errors about the row as a whole (e.g. "needs at least one field"). */
export const ROW_FIELD = '(row)';
