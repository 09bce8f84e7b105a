import { CrmSyncError } from '../errors/index.js';
import { CsvTokenizer, type CsvRawRecord } from './csv-tokenizer.js';
import { recordOf } from './records.js';
import type { ReaderContext, SourceItem } from './source-types.js';

/** Header names are trimmed: spreadsheets often carry stray spaces that nobody can see. */
function checkHeader(ctx: ReaderContext, header: CsvRawRecord): string[] {
  if (header.error !== undefined) {
    const code = header.error.code === 'INPUT_TOO_LARGE' ? 'INPUT_TOO_LARGE' : 'INPUT_PARSE';
    throw new CrmSyncError(code, `${ctx.name}: cannot read the header row: ${header.error.message}`);
  }
  const names = header.fields.map((f) => f.trim());
  if (names.length > ctx.maxColumns) {
    throw new CrmSyncError(
      'INPUT_TOO_LARGE',
      `${ctx.name}: the header has ${names.length} columns; the limit is ${ctx.maxColumns}`,
    );
  }
  const problems: string[] = [];
  const seen = new Map<string, number>();
  names.forEach((name, i) => {
    if (name === '') problems.push(`column ${i + 1} has no name`);
    const first = seen.get(name);
    if (name !== '' && first !== undefined) {
      problems.push(`column ${i + 1} repeats the name ${JSON.stringify(name)} of column ${first + 1}`);
    }
    if (!seen.has(name)) seen.set(name, i);
  });
  if (problems.length > 0) {
    throw new CrmSyncError(
      'INPUT_PARSE',
      `${ctx.name}: line ${header.line}: the header row must name every column once: ${problems.join('; ')}`,
    );
  }
  return names;
}

/** CSV text chunks → records and row problems. The first non-blank record is the header. */
export async function* readCsv(text: AsyncIterable<string>, ctx: ReaderContext): AsyncGenerator<SourceItem> {
  const tokenizer = new CsvTokenizer({ delimiter: ctx.delimiter, maxRecordBytes: ctx.maxRecordBytes });
  let columns: string[] | undefined;
  let row = 0;
  const batch: CsvRawRecord[] = [];
  const drain = function* (): Generator<SourceItem> {
    for (const rec of batch) {
      if (columns === undefined) {
        columns = checkHeader(ctx, rec);
        ctx.columns.push(...columns);
        ctx.onHeader?.();
        continue;
      }
      row++;
      if (rec.error !== undefined) {
        yield {
          kind: 'problem',
          row,
          line: rec.line,
          code: rec.error.code,
          message: rec.error.message,
          original: recordOf(columns, rec.fields),
        };
      } else if (rec.fields.length !== columns.length) {
        yield {
          kind: 'problem',
          row,
          line: rec.line,
          code: 'INPUT_PARSE',
          message:
            `line ${rec.line}: expected ${columns.length} fields, found ${rec.fields.length}` +
            (rec.fields.length > columns.length
              ? ` (a value containing ${JSON.stringify(ctx.delimiter)} must be quoted)`
              : ''),
          original: recordOf(columns, rec.fields),
        };
      } else {
        yield {
          kind: 'record',
          row,
          line: rec.line,
          values: recordOf(columns, rec.fields),
          original: recordOf(columns, rec.fields),
        };
      }
    }
    batch.length = 0;
  };
  for await (const chunk of text) {
    tokenizer.push(chunk, batch);
    yield* drain();
  }
  tokenizer.end(batch);
  yield* drain();
}
