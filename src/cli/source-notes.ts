import { isRunOnly } from '../crm/light.js';
import { parseMapping, recordedKeyColumn, RowDecoder, type SourceReader } from '../ingest/index.js';
import { describeError, groupProblems, placeWords, plural, type RunRecord, type RunStore } from '../runs/index.js';

const SHOWN = { ',': '","', ';': '";"', '\t': 'tab', '|': '"|"' } as Record<string, string>;

/**
 * What the first look at a file found that a person should know before trusting the counts:
 * a guessed delimiter, columns skipped on purpose. (A file without data rows is said by the
 * run summary: "0 data rows".)
 */
export function sourceNotes(reader: SourceReader, decoder: RowDecoder): string[] {
  const notes: string[] = [];
  if (reader.delimiterGuessed && reader.delimiter !== undefined) {
    notes.push(
      `delimiter: ${SHOWN[reader.delimiter] ?? JSON.stringify(reader.delimiter)} (guessed from the header line; --delimiter sets it)`,
    );
  }
  const ignored = decoder.ignoredColumns(reader.columns);
  if (ignored.length > 0) notes.push(`ignored columns (not sent): ${ignored.map((c) => JSON.stringify(c)).join(', ')}`);
  return notes;
}

/** Says the source's notes (sourceNotes) on stderr, one a line: what every command's onChecked does. */
export function printSourceNotes(reader: SourceReader, decoder: RowDecoder): void {
  for (const note of sourceNotes(reader, decoder)) process.stderr.write(`${note}\n`);
}

/** The first `limit` invalid and failed rows of a run, one line each, for a dry run's report. */
export async function firstProblems(store: RunStore, run: RunRecord, limit = 10): Promise<string[]> {
  const lines: string[] = [];
  // A JSON array may sit on one line: its rows are told apart by element (= row number).
  const element = run.options.format === 'json';
  for await (const result of store.iterateResults(run.id, { problemsOnly: true, batchSize: limit })) {
    const where = [element ? `element ${result.row}` : '', placeWords(result, run)].filter(Boolean).join(', ');
    lines.push(`  row ${result.row}${where ? ` (${where})` : ''}: ${result.status}: ${describeError(result)}`);
    if (lines.length >= limit) break;
  }
  return lines;
}

/**
 * A run's rows invalid for a name nothing resolved, grouped by column and value as the problem
 * groups have them (one group per value): `  12 rows: Stage (stage_id): "Negotiaton" is not a stage … (did you mean "Negotiation"?)`.
 */
export async function referenceProblemLines(store: RunStore, run: RunRecord, limit = 12): Promise<string[]> {
  if (run.counts.invalid === 0) return [];
  const { groups } = await groupProblems(store, run.id);
  const named = groups.filter((g) => g.code === 'REFERENCE_UNKNOWN' || g.code === 'REFERENCE_AMBIGUOUS');
  if (named.length === 0) return [];
  const lines = named.slice(0, limit).map((g) => `  ${plural(g.count, 'row')}: ${g.message}`);
  if (named.length > limit) lines.push(`  … and ${named.length - limit} more values`);
  return ['names not resolved (rows invalid, not sent):', ...lines];
}

/**
 * The columns a finished file run skipped on purpose (null in its mapping, or unknown with
 * "unmapped": "ignore" / --ignore-unknown-columns), from its stored columns and options. Not
 * for reconciled runs: their key column is read besides the fields and is not stored.
 */
export function ignoredColumnsOf(run: RunRecord): string[] {
  if (isRunOnly(run.operation) || run.options.reconcile || run.columns.length === 0) return [];
  try {
    const mapping =
      run.options.mapping !== undefined ? parseMapping(run.options.mapping, `mapping of run ${run.id}`) : undefined;
    const keyColumn = recordedKeyColumn(run);
    const decoder = new RowDecoder({
      op: run.operation,
      ...(mapping ? { mapping } : {}),
      ...(run.options.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
      ...(keyColumn !== undefined ? { extraColumns: [keyColumn] } : {}),
    });
    return decoder.ignoredColumns(run.columns);
  } catch {
    // A summary is no place to fail: a run from an older version may hold a mapping this one refuses.
    return [];
  }
}
