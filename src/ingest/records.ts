/**
 * Row objects keyed by column names from untrusted files. Plain objects keep V8's fast shapes
 * (rows of one file share a layout); the one key that plain assignment would misread,
 * `__proto__`, is defined as an ordinary own property instead of replacing the prototype.
 */
export function setField<T>(record: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__')
    Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
  else record[key] = value;
}

/** Fields by column; fields beyond the columns keep their 1-based position as a key. */
export function recordOf(columns: readonly string[], fields: readonly string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i < fields.length; i++) setField(record, columns[i] ?? `_extra_${i + 1}`, fields[i] as string);
  return record;
}
