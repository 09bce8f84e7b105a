/**
 * The one contract every row source (a file, stdin, a PostgreSQL query) meets, so the producer,
 * the CLI, reconcile and the scheduler never ask which kind of source they hold: a new kind is
 * a new implementation here, not a new branch in each of them (docs/architecture.md, "Source kinds").
 */
import type { QuerySourceSpec, SourceFormat, SourceReader } from './source-types.js';

/**
 * What a run records about its source besides its label, so a resume, a retry and a verify
 * read it again the same way and can tell whether it changed. Field names are the run
 * options' (src/runs/run-types.ts), which take this object as it is.
 */
export interface SourceFacts {
  /** A file's format (a query has none). */
  format?: SourceFormat;
  /** CSV: the delimiter read with (given or sniffed). */
  delimiter?: string;
  /** CSV: the file began with a UTF-8 BOM (its exports get one too). */
  bom?: boolean;
  /** CSV: its line ends, from the first one (its exports end lines the same way). */
  lineEnding?: '\r\n' | '\n';
  /** A query's text and where its URL comes from (never the URL). */
  query?: QuerySourceSpec;
  /** A file's size and whole-ms mtime when the run began: a resume refuses a file that changed. */
  sourceSize?: number;
  sourceMtimeMs?: number;
}

/** A run's record of its source (a RunRecord fits it): what resume reads a source again from. */
export interface RecordedSource {
  /** The run's `source`: the Source's label. */
  source: string;
  options: SourceFacts;
}

export interface Source {
  /**
   * Identity: what the run's `source` says and listings show (a file's path, a query's label
   * without its URL). A resume reads the source again from it and its facts.
   */
  readonly label: string;
  /** How sentences name it: "while reading the file", "the query returns". */
  readonly noun: 'file' | 'query';
  /** A column read besides the fields that names each row (a query's key column); undefined: none. */
  readonly keyColumn: string | undefined;
  /**
   * Resume point: true when every read gives the same rows under the same numbers, so a
   * resumed producer passes over rows up to the run's last produced row (those with a result)
   * and goes on after it. A query's rows may come back in another order: never resumed.
   */
  readonly resumable: boolean;
  /** The rows: each iteration reads the source from its start (opened on first use). */
  readonly reader: SourceReader;
  /** What the run records about the source; call once its columns were checked (a sniffed delimiter is known then). */
  facts(): SourceFacts;
  /** The source as `crm-sync import` arguments, for advice on sending the rest; `quote` makes a shell word. */
  commandWords(quote: (word: string) => string): string;
  /**
   * Lets the source go. `used`: a run records it (its resume, retry and verify read it again),
   * so it is kept; otherwise what exists only for this read (stdin's copy: piped rows may be
   * personal data) is removed, and the returned note says so.
   */
  close(options: { used: boolean }): Promise<string | undefined>;
}
