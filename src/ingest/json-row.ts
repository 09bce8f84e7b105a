import { setField } from './records.js';
import { RAW_TEXT_KEY, type ReaderContext, type SourceItem } from './source-types.js';

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return 'a string';
  if (typeof value === 'number') return 'a number';
  if (typeof value === 'boolean') return 'a boolean';
  return typeof value;
}

/** JSON values as the strings an export would show: text as-is, null as empty, the rest as JSON. */
function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return '';
  return JSON.stringify(value);
}

function rawOriginal(text: string): Record<string, string> {
  return { [RAW_TEXT_KEY]: text };
}

/**
 * One JSON text (an NDJSON line or an array element) → a record or a row problem. New keys are
 * added to `ctx.columns`, up to `maxColumns` distinct keys so a file of ever-new keys cannot
 * grow memory without bound.
 */
export function jsonRow(
  ctx: ReaderContext,
  seenColumns: Set<string>,
  row: number,
  line: number,
  text: string,
  where = `line ${line}`,
): SourceItem {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    return {
      kind: 'problem',
      row,
      line,
      code: 'INPUT_PARSE',
      message: `${where}: not valid JSON (${reason})`,
      original: rawOriginal(text),
    };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      kind: 'problem',
      row,
      line,
      code: 'INPUT_PARSE',
      message: `${where}: expected a JSON object (one row), found ${describe(value)}`,
      original: rawOriginal(text),
    };
  }
  const values = value as Record<string, unknown>;
  const keys = Object.keys(values);
  const fresh = keys.filter((k) => !seenColumns.has(k));
  if (seenColumns.size + fresh.length > ctx.maxColumns) {
    return {
      kind: 'problem',
      row,
      line,
      code: 'INPUT_TOO_LARGE',
      message: `${where}: this row brings the file to more than ${ctx.maxColumns} distinct field names`,
      original: rawOriginal(text),
    };
  }
  for (const k of fresh) {
    seenColumns.add(k);
    ctx.columns.push(k);
  }
  const original: Record<string, string> = {};
  for (const k of keys) setField(original, k, asText(values[k]));
  return { kind: 'record', row, line, values, original };
}

export function tooLarge(row: number, line: number, limit: number): SourceItem {
  return {
    kind: 'problem',
    row,
    line,
    code: 'INPUT_TOO_LARGE',
    message: `line ${line}: the row is larger than the limit of ${limit} bytes`,
    original: {},
  };
}
