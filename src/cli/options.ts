import { InvalidArgumentError, Option } from 'commander';

/** commander argument parser for positive integers, with a message that names the option. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number of 1 or more');
  return n;
}

/** Comma-separated list, e.g. `--workspace acme,globex`. */
export function list(value: string, previous: string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  ];
}

/** Comma-separated row numbers and ranges: `3,7,10-12`. */
export function rowList(value: string): number[] {
  const rows: number[] = [];
  for (const part of value.split(',')) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (!m) throw new InvalidArgumentError(`"${part}" is not a row number or range like 10-12`);
    const from = Number(m[1]);
    const to = m[2] !== undefined ? Number(m[2]) : from;
    if (to < from || to - from > 1_000_000) throw new InvalidArgumentError(`bad range "${part}"`);
    for (let r = from; r <= to; r++) rows.push(r);
  }
  return rows;
}

/** Where `import --from-postgres` reads the connection string when neither --db-url-env nor --db-url-file is given. */
export const DEFAULT_DB_URL_ENV = 'DATABASE_URL';

/**
 * How a source file is read: the same options, words and defaults on every command that reads
 * one (a factory each: commander options belong to one command).
 */
export const sourceFileOptions = {
  format: () =>
    new Option('--format <format>', 'input format (default: from the file extension)').choices([
      'csv',
      'ndjson',
      'json',
    ]),
  delimiter: () =>
    new Option(
      '--delimiter <char>',
      'CSV field delimiter (default: guessed from the header line among , ; tab |, and printed)',
    ),
  ignoreUnknownColumns: () =>
    new Option(
      '--ignore-unknown-columns',
      'skip columns that map to no field of the operation (listed) instead of refusing the file',
    ),
};
