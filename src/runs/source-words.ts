import { basename } from 'node:path';
import type { RowResult, RunRecord } from './run-types.js';

/**
 * How a run's source and a row's place in it are named to people. A database run's rows have
 * no lines: they are named by their key column's value where a file's rows show their line.
 */

/**
 * `line 12`, `key C-1042`, or '' when neither is known. Given the run, a CSV row also names the
 * row a spreadsheet shows it on (`line 111, spreadsheet row 102`): the header is the sheet's row
 * 1, so data row 101 is its row 102, and a quoted newline moves the line but not the sheet's row.
 */
export function placeWords(result: Pick<RowResult, 'line' | 'ref' | 'row'>, run?: Pick<RunRecord, 'options'>): string {
  if (result.ref !== undefined) return `key ${result.ref}`;
  const line = result.line !== undefined ? `line ${result.line}` : '';
  const csv = run !== undefined && run.options.query === undefined && run.options.format === 'csv';
  if (!csv) return line;
  return [line, `spreadsheet row ${result.row + 1}`].filter(Boolean).join(', ');
}

/** The source's short name: a file's base name, or a query's label (which names its URL's env variable or file, never the URL). */
export function sourceName(run: Pick<RunRecord, 'source' | 'options'>): string {
  return run.options.query !== undefined ? run.source : basename(run.source);
}
