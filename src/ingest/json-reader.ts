import { CrmSyncError } from '../errors/index.js';
import { JsonArraySplitter, type JsonPiece } from './json-array-splitter.js';
import { jsonRow, tooLarge } from './json-row.js';
import type { ReaderContext, SourceItem } from './source-types.js';

/** A JSON array of objects, streamed element by element (never parsed whole). */
export async function* readJsonArray(text: AsyncIterable<string>, ctx: ReaderContext): AsyncGenerator<SourceItem> {
  const splitter = new JsonArraySplitter(ctx.maxRecordBytes);
  const seen = new Set<string>();
  const pieces: JsonPiece[] = [];
  let row = 0;
  const drain = function* (): Generator<SourceItem> {
    for (const piece of pieces) {
      switch (piece.kind) {
        case 'element':
          ++row;
          // Elements share lines when the array is written on one: the element number tells them apart.
          yield jsonRow(ctx, seen, row, piece.line, piece.text, `element ${row} (line ${piece.line})`);
          break;
        case 'too-large':
          yield tooLarge(++row, piece.line, ctx.maxRecordBytes);
          break;
        case 'broken':
          yield {
            kind: 'problem',
            row: ++row,
            line: piece.line,
            code: 'INPUT_PARSE',
            message: piece.message,
            original: {},
          };
          break;
        case 'not-array':
          throw new CrmSyncError(
            'INPUT_PARSE',
            `${ctx.name}: line ${piece.line}: expected a JSON array of objects ("[" first), found ${JSON.stringify(piece.found)}`,
          );
      }
    }
    pieces.length = 0;
  };
  for await (const chunk of text) {
    splitter.push(chunk, pieces);
    yield* drain();
  }
  splitter.end(pieces);
  yield* drain();
}
