import { jsonRow, tooLarge } from './json-row.js';
import type { ReaderContext, SourceItem } from './source-types.js';

/** NDJSON text chunks → one record per non-blank line. Blank lines are not rows. */
export async function* readNdjson(text: AsyncIterable<string>, ctx: ReaderContext): AsyncGenerator<SourceItem> {
  const seen = new Set<string>();
  let row = 0;
  let line = 1;
  let pending = '';
  let pendingTooLarge = false;

  function* finish(raw: string): Generator<SourceItem> {
    const lineText = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const wasTooLarge =
      pendingTooLarge ||
      lineText.length > ctx.maxRecordBytes ||
      // Characters bound bytes from below; measure bytes only when that bound is not enough.
      (lineText.length * 3 > ctx.maxRecordBytes && Buffer.byteLength(lineText) > ctx.maxRecordBytes);
    pendingTooLarge = false;
    if (wasTooLarge) {
      yield tooLarge(++row, line, ctx.maxRecordBytes);
    } else if (lineText.trim() !== '') {
      yield jsonRow(ctx, seen, ++row, line, lineText);
    }
    line++;
  }

  for await (const chunk of text) {
    let from = 0;
    for (let nl = chunk.indexOf('\n'); nl !== -1; nl = chunk.indexOf('\n', from)) {
      const lineText = pendingTooLarge ? '' : pending + chunk.slice(from, nl);
      pending = '';
      yield* finish(lineText);
      from = nl + 1;
    }
    if (!pendingTooLarge) {
      pending += chunk.slice(from);
      // Over the limit: drop it now and only remember that it was, so memory stays bounded.
      if (pending.length > ctx.maxRecordBytes) {
        pending = '';
        pendingTooLarge = true;
      }
    }
  }
  if (pendingTooLarge || pending.trim() !== '') yield* finish(pending);
}
