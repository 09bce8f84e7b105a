import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { OPERATIONS, idFreeMatchKeys, type Operation } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import type { HeaderProblem, RowDecoder } from './row-decoder.js';

const HEAD_BYTES = 64 * 1024;

/** File signatures of formats people export by mistake instead of CSV. */
const SIGNATURES: Array<{ bytes: number[]; what: string }> = [
  { bytes: [0x50, 0x4b, 0x03, 0x04], what: 'an Excel workbook (.xlsx) or another zip file: save it as CSV UTF-8' },
  { bytes: [0xd0, 0xcf, 0x11, 0xe0], what: 'an old Excel workbook (.xls): save it as CSV UTF-8' },
  { bytes: [0x25, 0x50, 0x44, 0x46], what: 'a PDF document: export the data as CSV' },
  { bytes: [0x1f, 0x8b], what: 'a gzip-compressed file: unpack it first' },
];

/**
 * The first bytes of a file, after refusing what can never be a row source: a directory, a
 * file with nothing in it, a workbook, PDF or archive. A file that cannot be opened returns
 * undefined (so does a pipe): the reader reports it (INPUT_UNREADABLE) where every read error is reported.
 */
export function checkFileHead(path: string): Buffer | undefined {
  let fd: number;
  try {
    const stat = statSync(path);
    if (stat.isDirectory()) throw new CrmSyncError('INPUT_UNREADABLE', `${path} is a directory, not a file`);
    // A pipe or device is read once, by the reader: looking at its head here would eat it.
    if (!stat.isFile()) return undefined;
    fd = openSync(path, 'r');
  } catch (err) {
    if (err instanceof CrmSyncError) throw err;
    return undefined;
  }
  let head: Buffer;
  try {
    const buffer = Buffer.alloc(HEAD_BYTES);
    head = buffer.subarray(0, readSync(fd, buffer, 0, HEAD_BYTES, 0));
  } finally {
    closeSync(fd);
  }
  for (const { bytes, what } of SIGNATURES) {
    if (bytes.every((b, i) => head[i] === b)) throw new CrmSyncError('INPUT_UNREADABLE', `${path}: this is ${what}`);
  }
  // A BOM and white space alone are still nothing.
  const text = head.subarray(head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0).toString('latin1');
  if (head.length < HEAD_BYTES && text.trim() === '')
    throw new CrmSyncError('INPUT_EMPTY', `${path}: the file is empty`);
  return head;
}

const CANDIDATES = [',', ';', '\t', '|'] as const;

/**
 * The delimiter of a CSV header line: the most frequent of , ; tab | outside quotes, ',' on a
 * tie or when none occurs (a one-column file).
 */
export function sniffDelimiter(head: Buffer): string {
  const text = head.toString('utf8');
  const counts = new Map<string, number>(CANDIDATES.map((c) => [c, 0]));
  let quoted = false;
  for (const ch of text) {
    if (ch === '"') quoted = !quoted;
    else if (!quoted && (ch === '\n' || ch === '\r')) break;
    else if (!quoted && counts.has(ch)) counts.set(ch, counts.get(ch)! + 1);
  }
  let best = ',';
  // Every candidate has a count (from 0), `best` among them.
  for (const c of CANDIDATES) if (counts.get(c)! > counts.get(best)!) best = c;
  return best;
}

/** Keys rows of each update operation can be matched by instead of an id (the operation table's). */
export const ID_FREE_MATCH_KEYS: Readonly<Partial<Record<Operation, readonly string[]>>> = Object.fromEntries(
  OPERATIONS.flatMap((op) => {
    const keys = idFreeMatchKeys(op);
    return keys === undefined ? [] : [[op, keys]];
  }),
);

/**
 * An update file (or query) whose header has no column for `id` can send no row: say so once,
 * for the whole file, before a run exists (INPUT_COLUMNS), instead of "id: is required" on
 * every row, and name what does work: matching by a key the file has (`--reconcile --match`).
 * Only for sources whose columns are known up front (a CSV header, a query's columns). Said as
 * a HeaderProblem: checkSource puts the file's column problems in the same message.
 */
export function idColumnProblem(
  decoder: RowDecoder,
  columns: readonly string[],
  source: 'file' | 'query',
): HeaderProblem | undefined {
  const keys = ID_FREE_MATCH_KEYS[decoder.op];
  if (keys === undefined) return undefined;
  // One column holding ; tab or |: the delimiter is wrong, and the decoder says which to pass.
  if (columns.length === 1 && /[;\t|]/.test(columns[0] ?? '')) return undefined;
  const idRule = decoder.rules.find((r) => r.field === 'id');
  // A column the mapping names for id but the header lacks is the decoder's to report, with
  // the header it most likely is (a typo, not a file without ids).
  if (idRule !== undefined && (columns.includes(idRule.column) || !idRule.implicit)) return undefined;
  // The match keys the source has: the column a mapping fills the field from, else the column
  // named like the key (unique_number is no field of an update, reconcile reads it as the key).
  const present = keys.flatMap((key) => {
    const column = decoder.rules.find((r) => r.field === key)?.column ?? key;
    return columns.includes(column) ? [{ key, column }] : [];
  });
  const first = present[0];
  const instead =
    first !== undefined
      ? `It has the key column ${first.column === first.key ? `"${first.key}"` : `"${first.column}" (${first.key})`}: ` +
        `import it with --reconcile --match ${first.key} to find each record by ${first.key} instead`
      : `Add an id column, or match rows by a key column with --reconcile --match ${keys.join('|')} (--key-column names the column)`;
  return {
    problem: `the ${source} has no "id" column, so no row can be sent: ${decoder.op} finds each record by its id. ${instead}`,
    keyColumns: present.map((p) => p.column),
  };
}
