import { basename } from 'node:path';
import type { RowResult, RunRecord } from './run-types.js';

/**
 * How a run's source and a row's place in it are named to people. A database run's rows have
 * no lines: they are named by their key column's value where a file's rows show their line.
 */

/** `line 12`, `key C-1042`, or '' when neither is known. */
export function placeWords(result: Pick<RowResult, 'line' | 'ref'>): string {
  if (result.ref !== undefined) return `key ${result.ref}`;
  return result.line !== undefined ? `line ${result.line}` : '';
}

/** The source's short name: a file's base name, or a query's label (which names its URL's env variable or file, never the URL). */
export function sourceName(run: Pick<RunRecord, 'source' | 'options'>): string {
  return run.options.query !== undefined ? run.source : basename(run.source);
}
