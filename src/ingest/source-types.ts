/**
 * The reader contract the producer codes against. Types only: the readers live in their own
 * files, and the producer imports all of this through `src/ingest/index.js`.
 */

export type SourceFormat = 'csv' | 'ndjson' | 'json';

/** What a run records about its query so it can be shown and explained later; holds no secret. */
export interface QuerySourceSpec {
  /** Env variable or file the connection string was read from. */
  urlEnv?: string;
  urlFile?: string;
  query: string;
  /** Column whose value names each row (results, exports, retries) instead of a line number. */
  keyColumn?: string;
}

/** What a reader reads: a file format, or a database query (src/ingest/postgres-reader.ts). */
export type SourceKind = SourceFormat | 'postgres';

export interface ReadSourceOptions {
  /** Default: from the extension (.csv, .tsv → csv; .ndjson, .jsonl → ndjson; .json → json). */
  format?: SourceFormat;
  /**
   * CSV only, one character. Default: '\t' for a .tsv file, else sniffed from the header line
   * (the most frequent of , ; tab | outside quotes; ',' on a tie or when none occurs).
   */
  delimiter?: string;
  /** Largest record accepted; a bigger one becomes an INPUT_TOO_LARGE row problem. Default 1 MiB. */
  maxRecordBytes?: number;
  /** Most columns a header (or the union of JSON keys) may have. Default 500. */
  maxColumns?: number;
}

export const DEFAULT_MAX_RECORD_BYTES = 1024 * 1024;
export const DEFAULT_MAX_COLUMNS = 500;

/** A row read from the source. `values` may hold nested JSON; `original` is always strings. */
export interface SourceRecord {
  kind: 'record';
  /** 1-based data row (header excluded); problems consume row numbers too, so rows are stable. */
  row: number;
  /** 1-based physical line where the row starts (a query's row number: a query has no lines). */
  line: number;
  values: Record<string, unknown>;
  original: Record<string, string>;
  /**
   * The row's source reference: its key column's value (a database source's `keyColumn`), so
   * results, exports and retries name the source row where a file's show its line. Default none.
   */
  ref?: string;
}

/** A row that could not be read; the rest of the file still runs. */
export interface SourceProblem {
  kind: 'problem';
  row: number;
  line: number;
  code: 'INPUT_PARSE' | 'INPUT_TOO_LARGE';
  message: string;
  /** What could be recovered of the row (possibly `{}`; raw JSON text under RAW_TEXT_KEY). */
  original: Record<string, string>;
  /** See SourceRecord.ref. */
  ref?: string;
}

export type SourceItem = SourceRecord | SourceProblem;

export interface SourceReader extends AsyncIterable<SourceItem> {
  readonly format: SourceKind;
  /** CSV only: the field delimiter read with. */
  readonly delimiter?: string;
  /** CSV only: true when the delimiter was guessed from the header line (no --delimiter, no .tsv). */
  readonly delimiterGuessed?: boolean;
  /** CSV header order; for JSON/NDJSON the keys in order of first appearance (grows while reading). */
  readonly columns: string[];
  readonly bytesRead: number;
  readonly totalBytes: number;
  /**
   * CSV, a query: resolves once the iteration in progress has read the header or the query's
   * row description (its columns are then complete), so they can be checked before any row
   * arrives (a pipe may be slow to send one).
   */
  headerRead?(): Promise<void>;
}

/** True when a reader knows all its columns before the first row (a CSV header, a query's columns); JSON keys grow while reading. */
export function columnsUpFront(reader: Pick<SourceReader, 'format'>): boolean {
  return reader.format === 'csv' || reader.format === 'postgres';
}

/**
 * Key under which a problem's `original` keeps the raw text of an unparseable JSON row, so the
 * row is not lost from exports even though it has no columns.
 */
export const RAW_TEXT_KEY = '_raw';

/** What a format reader needs besides the text. `columns` is shared with the SourceReader. */
export interface ReaderContext {
  /** File name for fatal error messages. */
  readonly name: string;
  readonly delimiter: string;
  readonly maxRecordBytes: number;
  readonly maxColumns: number;
  readonly columns: string[];
  /** Called by the CSV reader once the header is in `columns`. */
  readonly onHeader?: () => void;
}
