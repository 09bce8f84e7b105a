import { closeSync, openSync, readSync } from 'node:fs';

/**
 * How a CSV file is written besides its delimiter: a UTF-8 BOM and its line ends. Exports of a
 * run (failed rows, all results, plans) are written the same way, so a file that Excel with
 * European settings opened (`;`, a BOM, CRLF) opens again in columns.
 */
export interface CsvDialect {
  delimiter: string;
  bom: boolean;
  lineEnding: '\r\n' | '\n';
}

/** What an export writes when nothing is known of the source (a query, a JSON file): RFC 4180's comma, LF, no BOM. */
export const DEFAULT_CSV_DIALECT: CsvDialect = { delimiter: ',', bom: false, lineEnding: '\n' };

const HEAD_BYTES = 64 * 1024;

/**
 * A file's BOM and line ends, read from its first 64 KiB: CRLF when the first line end is one.
 * Nothing (an empty object) when the file cannot be read or has no line end in its head.
 */
export function sniffCsvLayout(path: string): Partial<Pick<CsvDialect, 'bom' | 'lineEnding'>> {
  let head: Buffer;
  try {
    const fd = openSync(path, 'r');
    try {
      head = Buffer.alloc(HEAD_BYTES);
      head = head.subarray(0, readSync(fd, head, 0, HEAD_BYTES, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return {};
  }
  const bom = head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf;
  const lf = head.indexOf(0x0a);
  if (lf === -1) return { bom };
  return { bom, lineEnding: lf > 0 && head[lf - 1] === 0x0d ? '\r\n' : '\n' };
}

/** The facts a run or plan recorded of its source, as far as they shape a CSV. */
export interface DialectFacts {
  format?: string;
  delimiter?: string;
  bom?: boolean;
  lineEnding?: '\r\n' | '\n';
}

/**
 * The dialect an export of a source's rows is written in: the source's own when it was a CSV
 * (its delimiter, BOM and line ends), else the default; `given` (`--delimiter`, `--bom`) wins.
 */
export function csvDialectOf(facts: DialectFacts | undefined, given: Partial<CsvDialect> = {}): CsvDialect {
  const csv = facts !== undefined && (facts.format ?? 'csv') === 'csv' && facts.delimiter !== undefined;
  const base: CsvDialect = csv
    ? { delimiter: facts.delimiter ?? ',', bom: facts.bom ?? false, lineEnding: facts.lineEnding ?? '\n' }
    : DEFAULT_CSV_DIALECT;
  return {
    delimiter: given.delimiter ?? base.delimiter,
    bom: given.bom ?? base.bom,
    lineEnding: given.lineEnding ?? base.lineEnding,
  };
}

/** csv-stringify's options for a dialect; `bom` only where the stringifier writes the file's start. */
export function stringifyOptions(
  d: CsvDialect,
  start = true,
): { delimiter: string; record_delimiter: string; bom: boolean } {
  return { delimiter: d.delimiter, record_delimiter: d.lineEnding, bom: start && d.bom };
}
