import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify';
import type { RunResults } from './run-archive.js';
import {
  csvDialectOf,
  reopenSource,
  sourceChange,
  stringifyOptions,
  type CsvDialect,
  type SourceItem,
} from '../ingest/index.js';
import { changeCells } from './change-words.js';
import type { RowResult, RunRecord } from './run-types.js';

/**
 * Columns every export starts with. Prefixed so they never clash with a source column
 * (a lead file has its own `status`); the source's columns follow in the run's order.
 */
export const EXPORT_META_COLUMNS = [
  'crm_sync_run_id',
  'crm_sync_row',
  'crm_sync_line',
  'crm_sync_result',
  'crm_sync_record_id',
  'crm_sync_http_status',
  'crm_sync_error',
  // What a succeeded row wrote over, and wrote (RowResult.changes): JSON objects by field.
  'crm_sync_before',
  'crm_sync_after',
] as const;

/** After crm_sync_line in the exports of runs whose rows have keys (a database run's key column). */
export const EXPORT_KEY_COLUMN = 'crm_sync_key';

/** True for a column an export adds (never a source column): a corrected file's values leave it out. */
export function isExportMetaColumn(column: string): boolean {
  return column === EXPORT_KEY_COLUMN || (EXPORT_META_COLUMNS as readonly string[]).includes(column);
}

/** The meta columns of a run's export: the key column only for runs that name rows by a key. */
export function exportMetaColumns(run: Pick<RunRecord, 'options'>): string[] {
  const meta: string[] = [...EXPORT_META_COLUMNS];
  if (run.options.query?.keyColumn !== undefined) meta.splice(meta.indexOf('crm_sync_line') + 1, 0, EXPORT_KEY_COLUMN);
  return meta;
}

export interface WriteResultsCsvOptions {
  /** Only failed, invalid and uncertain rows (the file to fix and re-import). Default false. */
  problemsOnly?: boolean;
  /** Only the rows this accepts (e.g. one error group). Default: every row read. */
  filter?: (result: RowResult) => boolean;
  /** Delimiter, BOM and line ends to write with; default: the run's CSV source's own (csvDialectOf). */
  dialect?: Partial<CsvDialect>;
}

/** Characters that make a spreadsheet read a cell as a formula (OWASP CSV injection). */
const FORMULA_START = /^[=+\-@\t\r]/;
/** A cell escapeCsvCell changed: one added quote, then (possibly quoted) formula start. */
const ESCAPED = /^'+[=+\-@\t\r]/;
/** Cells that need escaping: a formula start behind any number of quotes. */
const NEEDS_ESCAPE = /^'*[=+\-@\t\r]/;

/**
 * Prefixes `'` to a cell a spreadsheet would run as a formula. A cell that already starts
 * with quotes before a formula character gets one more, so unescapeCsvCell is an exact
 * inverse (`'=x` from the source survives a round trip as `'=x`, not `=x`).
 */
export function escapeCsvCell(value: string): string {
  return NEEDS_ESCAPE.test(value) ? `'${value}` : value;
}

/** Undoes escapeCsvCell: strips the one quote it added, and nothing else. */
export function unescapeCsvCell(value: string): string {
  return ESCAPED.test(value) ? value.slice(1) : value;
}

/** True when a cell would be read as a formula if left unescaped. */
export function isFormulaLike(value: string): boolean {
  return FORMULA_START.test(value);
}

export function describeError(result: RowResult): string {
  const parts: string[] = [];
  if (result.message !== undefined && result.message !== '') parts.push(result.message);
  for (const error of result.errors ?? []) {
    const text = `${error.field}: ${error.message}`;
    // Producers often summarise the field errors in the message already: say each once.
    if (!result.message?.includes(text)) parts.push(text);
  }
  return parts.join('; ');
}

/**
 * A file run's source read again in row order beside its results: what a succeeded row read,
 * which the run store does not keep. `missing` says why not (a query, a file changed or gone).
 */
class SourceRows {
  missing: string | undefined;
  #rows: AsyncIterator<SourceItem> | undefined;
  #next: SourceItem | undefined;

  constructor(run: RunRecord) {
    const recorded = { source: run.source, options: run.options };
    this.missing =
      run.options.query !== undefined
        ? 'its rows came from a database query, which is not read again'
        : sourceChange(recorded);
    if (this.missing === undefined) this.#rows = reopenSource(recorded).reader[Symbol.asyncIterator]();
  }

  async at(row: number): Promise<Record<string, string> | undefined> {
    if (this.#rows === undefined) return undefined;
    try {
      while (this.#next === undefined || this.#next.row < row) {
        const step = await this.#rows.next();
        if (step.done === true) return this.#stop('the file has fewer rows than the run read');
        this.#next = step.value;
      }
    } catch (err) {
      return this.#stop(`the file could not be read again (${err instanceof Error ? err.message : String(err)})`);
    }
    return this.#next.row === row ? this.#next.original : undefined;
  }

  async close(): Promise<void> {
    await this.#rows?.return?.();
  }

  #stop(why: string): undefined {
    this.missing = why;
    this.#rows = undefined;
    return undefined;
  }
}

/**
 * Streams a run's results as CSV into `out`, in row order. Redis is read in batches and the
 * stream's back-pressure is respected, so any run size exports in bounded memory. `out` is
 * not ended: the caller owns it (stdout must stay open; a file stream is closed by its
 * opener).
 */
export async function writeResultsCsv(
  store: RunResults,
  runId: string,
  out: NodeJS.WritableStream,
  options: WriteResultsCsvOptions = {},
): Promise<{ rows: number; inputNotShown?: string }> {
  const run = await store.requireRun(runId);
  // Only failed rows keep their input in Redis; a full export reads the others from the source again.
  const source = options.problemsOnly === true ? undefined : new SourceRows(run);
  const columns = run.columns;
  const keyed = run.options.query?.keyColumn !== undefined;
  const names = await store.names(runId);
  let rows = 0;
  async function* records(): AsyncGenerator<string[]> {
    yield [...exportMetaColumns(run), ...columns].map(escapeCsvCell);
    for await (const result of store.iterateResults(runId, { problemsOnly: options.problemsOnly ?? false })) {
      if (options.filter !== undefined && !options.filter(result)) continue;
      rows++;
      const meta = [
        run.id,
        String(result.row),
        result.line === undefined ? '' : String(result.line),
        ...(keyed ? [result.ref ?? ''] : []),
        result.status,
        result.recordId ?? '',
        result.httpStatus === undefined ? '' : String(result.httpStatus),
        describeError(result),
        ...Object.values(changeCells(result.changes, names)),
      ];
      const original = result.original ?? (await source?.at(result.row)) ?? {};
      yield [...meta, ...columns.map((column) => original[column] ?? '')].map(escapeCsvCell);
    }
  }
  const dialect = csvDialectOf(run.options, options.dialect);
  try {
    await pipeline(Readable.from(records()), stringify(stringifyOptions(dialect)), out, { end: false });
  } finally {
    await source?.close();
  }
  return { rows, ...(source?.missing !== undefined ? { inputNotShown: source.missing } : {}) };
}
