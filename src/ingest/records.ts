/**
 * Null-prototype records: column names come from untrusted files, and a column called
 * `__proto__` must be an ordinary key, not a write to the prototype.
 */
export function emptyRecord<T>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}
