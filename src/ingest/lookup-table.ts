import { readFileSync, statSync } from 'node:fs';
import { basename } from 'node:path';
import { CrmSyncError } from '../errors/index.js';
import { normaliseReferenceName } from '../references/index.js';
import { CsvTokenizer, type CsvRawRecord } from './csv-tokenizer.js';
import { didYouMean } from './did-you-mean.js';

/** A mapping column's `lookup`: the file the user gives, its key column and its value column. */
export interface LookupSpec {
  file: string;
  key: string;
  value: string;
}

/** A lookup file read: cell (its key, as people type it) → the id its value column holds. */
export interface LookupTable {
  readonly file: string;
  /** The key column's values as written, for did-you-mean. */
  readonly keys: readonly string[];
  get(cell: string): string | undefined;
}

const MAX_LOOKUP_BYTES = 64 * 1024 * 1024;
const cache = new Map<string, { stamp: string; table: LookupTable }>();

function refuse(message: string): never {
  throw new CrmSyncError('MAPPING_INVALID', message);
}

/** Rows of a CSV lookup file as {line, cells by header}. */
function csvRows(path: string, text: string): Array<{ line: number; cells: Record<string, string> }> {
  const firstLine = text.slice(0, text.search(/\r|\n|$/));
  const delimiter = [',', ';', '\t'].sort((a, b) => firstLine.split(b).length - firstLine.split(a).length)[0]!;
  const tokenizer = new CsvTokenizer({ delimiter, maxRecordBytes: MAX_LOOKUP_BYTES });
  const records: CsvRawRecord[] = [];
  tokenizer.push(text.replace(/^\uFEFF/, ''), records);
  tokenizer.end(records);
  const [header, ...rest] = records;
  if (header === undefined) refuse(`lookup file ${path} is empty: it needs a header and rows`);
  const bad = records.find((r) => r.error !== undefined);
  if (bad?.error) refuse(`lookup file ${path} line ${bad.line}: ${bad.error.message}`);
  const names = header.fields.map((f) => f.trim());
  return rest
    .filter((r) => r.fields.some((f) => f.trim() !== ''))
    .map((r) => ({ line: r.line, cells: Object.fromEntries(names.map((n, i) => [n, r.fields[i] ?? ''])) }));
}

/** Rows of a JSON lookup file: an array of objects (element n is "element n"), or one object key → value. */
function jsonRows(
  path: string,
  text: string,
  spec: LookupSpec,
): Array<{ line: number; cells: Record<string, string>; where: string }> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    return refuse(`lookup file ${path} is not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  if (Array.isArray(doc))
    return doc.map((item, i) => {
      if (item === null || typeof item !== 'object' || Array.isArray(item))
        refuse(`lookup file ${path} element ${i + 1}: must be an object like {"${spec.key}": …, "${spec.value}": …}`);
      const cells = Object.fromEntries(
        Object.entries(item as Record<string, unknown>).map(([k, v]) => [k, v === null ? '' : String(v)]),
      );
      return { line: i + 1, cells, where: `element ${i + 1}` };
    });
  if (doc !== null && typeof doc === 'object')
    return Object.entries(doc as Record<string, unknown>).map(([k, v], i) => ({
      line: i + 1,
      cells: { [spec.key]: k, [spec.value]: v === null ? '' : String(v) },
      where: `key ${JSON.stringify(k)}`,
    }));
  return refuse(`lookup file ${path} must hold an array of objects or one object of key → value`);
}

/**
 * Reads a lookup file (CSV with a header, or JSON) into a table, refusing what would make a
 * cell mean two things: a key (as names compare: trimmed, case and Unicode form ignored) on two
 * lines, or a row without a value. Read once per file and change (size and mtime).
 */
export function loadLookupTable(spec: LookupSpec): LookupTable {
  const path = spec.file;
  let stamp: string;
  let text: string;
  try {
    const st = statSync(path);
    stamp = `${st.size}:${st.mtimeMs}:${spec.key}:${spec.value}`;
    const hit = cache.get(path);
    if (hit?.stamp === stamp) return hit.table;
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (err instanceof CrmSyncError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    return refuse(
      `cannot read lookup file ${path}: ${code === 'ENOENT' ? 'the file does not exist' : String(code ?? err)}`,
    );
  }
  const json = /\.(json|ndjson)$/i.test(path) || /^\s*[[{]/.test(text);
  const rows = json ? jsonRows(path, text, spec) : csvRows(path, text).map((r) => ({ ...r, where: `line ${r.line}` }));
  const columns = new Set(rows.flatMap((r) => Object.keys(r.cells)));
  if (!json || rows.length > 0) {
    const header = json ? [...columns] : Object.keys(rows[0]?.cells ?? {});
    for (const column of [spec.key, spec.value])
      if (rows.length > 0 && !header.includes(column))
        refuse(
          `lookup file ${path} has no column ${JSON.stringify(column)}${didYouMean(column, header)} (its columns: ${header.map((h) => JSON.stringify(h)).join(', ')})`,
        );
  }
  const values = new Map<string, { id: string; where: string }>();
  const keys: string[] = [];
  for (const r of rows) {
    const key = (r.cells[spec.key] ?? '').trim();
    const id = (r.cells[spec.value] ?? '').trim();
    if (key === '') continue;
    if (id === '') refuse(`lookup file ${path} ${r.where}: ${JSON.stringify(key)} has no ${spec.value}`);
    const norm = normaliseReferenceName(key);
    const earlier = values.get(norm);
    if (earlier !== undefined)
      refuse(
        `lookup file ${path} ${r.where}: ${spec.key} ${JSON.stringify(key)} is already on ${earlier.where}; a key must name one ${spec.value}`,
      );
    values.set(norm, { id, where: r.where });
    keys.push(key);
  }
  const table: LookupTable = {
    file: basename(path),
    keys,
    get: (cell) => values.get(normaliseReferenceName(cell))?.id,
  };
  cache.set(path, { stamp, table });
  return table;
}
