import { InvalidArgumentError, Option, type Command } from 'commander';
import { RECONCILE_OPERATIONS, type ReconcileOperation } from '../crm/light.js';
import type { SourceFormat } from '../ingest/index.js';
import { CrmSyncError } from '../errors/index.js';

/** commander argument parser for positive integers, with a message that names the option. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number of 1 or more');
  return n;
}

/** commander argument parser for whole numbers of 0 or more. */
export function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be a whole number of 0 or more');
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

/** The width help text is written for: a terminal's default. */
export const HELP_WIDTH = 80;

/**
 * Text after a command's help (examples, exit codes, notes), fitted to 80 columns: commander
 * wraps descriptions but prints this as it is. Each line of `text` is one paragraph, item or
 * example, never a piece of a sentence. Prose wraps at the width; an item like `  2  bad
 * arguments` wraps under its text; an indented example (a command line) wraps with a shell
 * continuation (` \`), so it can still be pasted.
 */
export function helpFooter(text: string, width = HELP_WIDTH): string {
  return text
    .split('\n')
    .map((line) => {
      if (line.length <= width) return line;
      const item = /^(\s*)(\d+\s+|\S+:\s+)?/.exec(line)!;
      const lead = item[1] ?? '';
      const example = lead.length > 0 && item[2] === undefined;
      const hanging = example ? `${lead}  ` : ' '.repeat(item[0].length);
      return wrapWords(item[0], line.slice(item[0].length), width, hanging, example ? ' \\' : '');
    })
    .join('\n');
}

/** `prefix` (an indent, an item's marker) is kept as written; the rest wraps under `hanging`. */
function wrapWords(prefix: string, rest: string, width: number, hanging: string, continuation: string): string {
  const words = rest.trim().split(/ +/);
  const out: string[] = [];
  let current = prefix;
  let fresh = true;
  for (const word of words) {
    if (!fresh && current.length + 1 + word.length > width - continuation.length) {
      out.push(`${current}${continuation}`);
      current = hanging + word;
    } else current = fresh ? current + word : `${current} ${word}`;
    fresh = false;
  }
  out.push(current);
  return out.join('\n');
}

/** `import --name`: one line of at most 80 characters, for lists and headings. */
export function runName(value: string): string {
  const name = value.trim();
  if (name === '' || name.length > 80 || /[\r\n]/.test(name))
    throw new InvalidArgumentError('must be one line of 1 to 80 characters');
  return name;
}

/** What matchOptions declares, as commander hands it to an action. */
export interface MatchOptions {
  op: ReconcileOperation;
  workspace: string;
  match?: string;
  keyColumn?: string;
  mapping?: string;
  format?: SourceFormat;
  delimiter?: string;
  ignoreUnknownColumns?: boolean;
}

/**
 * What `plan` and `reconcile` both take: the operation, the workspace, how rows are matched to
 * records, the mapping and the file's format.
 */
export function matchOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--op <operation>', 'what each row does (deal.upsert: update by key, create what is missing)')
        .choices(RECONCILE_OPERATIONS)
        .makeOptionMandatory(),
    )
    .requiredOption('-w, --workspace <name>', 'workspace from the config')
    .option('--match <key>', 'match rows without an id by this key (email, unique_number, name, …)')
    .option(
      '--key-column <column>',
      'source column holding the key (default: the column mapped to it, or named like it)',
    )
    .option('-m, --mapping <file>', 'JSON file mapping source columns to API fields')
    .addOption(sourceFileOptions.format())
    .addOption(sourceFileOptions.delimiter())
    .addOption(sourceFileOptions.ignoreUnknownColumns());
}

/** What `--delimiter`, `--bom`/`--no-bom` and `--line-ending` of an export command parse to. */
export interface ExportDialectOptions {
  delimiter?: string;
  bom?: boolean;
  lineEnding?: 'crlf' | 'lf';
}

/**
 * The options that choose how an export is written; unset, an export follows its source file
 * (its delimiter, BOM and line ends), so a `;`-separated file opens in columns again.
 */
export function exportDialectOptions(command: Command): Command {
  return command
    .option('--delimiter <char>', "the exported file's delimiter (default: the source file's, or ,)")
    .option('--bom', 'begin the file with a UTF-8 BOM (default: when the source file had one)')
    .option('--no-bom', 'no BOM, whatever the source had')
    .addOption(
      new Option('--line-ending <kind>', "line ends (default: the source file's, or lf)").choices(['crlf', 'lf']),
    );
}

/** The dialect the options ask for (only what was given: the rest follows the source). */
export function givenDialect(opts: ExportDialectOptions): {
  delimiter?: string;
  bom?: boolean;
  lineEnding?: '\r\n' | '\n';
} {
  // `\t` as typed in a shell is a tab.
  const delimiter = opts.delimiter === '\\t' ? '\t' : opts.delimiter;
  if (
    delimiter !== undefined &&
    ([...delimiter].length !== 1 || delimiter === '"' || delimiter === '\n' || delimiter === '\r')
  )
    throw new CrmSyncError(
      'USAGE',
      `--delimiter takes one character other than a quote or a line end, not ${JSON.stringify(opts.delimiter)}`,
    );
  return {
    ...(delimiter !== undefined ? { delimiter } : {}),
    ...(opts.bom !== undefined ? { bom: opts.bom } : {}),
    ...(opts.lineEnding !== undefined ? { lineEnding: opts.lineEnding === 'crlf' ? '\r\n' : '\n' } : {}),
  };
}
