import type { ListResource } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import type { ReferenceIndex } from '../references/index.js';
import { idColumnProblem } from './file-check.js';
import { openSource } from './open-source.js';
import { RowDecoder, type HeaderProblem, type IngestedRow, type RowDecoderOptions } from './row-decoder.js';
import { columnsUpFront, type ReadSourceOptions, type SourceItem, type SourceReader } from './source-types.js';

/** Reads the workspace's references for the lists a mapping's names need (readReferences, in the budget). */
export type LoadReferences = (lists: ListResource[]) => Promise<ReferenceIndex>;

export interface IngestOptions extends ReadSourceOptions, RowDecoderOptions {
  /**
   * Where a mapping's names (`"by": "name"`) resolve from: called once, after the columns passed
   * and before the first row is decoded. Without it such a mapping is refused. Default none.
   */
  loadReferences?: LoadReferences;
}

/** The rows of a source whose columns passed their check; it may be iterated once. */
export interface CheckedSource {
  items: AsyncIterable<SourceItem>;
  /**
   * Lets the source go (its file handle, or its database connection and transaction) when it
   * will not be read to the end: `items` does so itself when its loop stops early, but a caller
   * that fails before it iterates at all must call this. Safe to call twice or after the end.
   */
  close(): Promise<void>;
}

/**
 * Starts reading a source and checks its columns against the decoder as soon as they are
 * known (the CSV header, or the first JSON row's keys), and refuses a source with nothing in
 * it (INPUT_EMPTY): these mistakes end the command before a run is created. The source is read
 * once: `items` goes on from where the check stopped (a pipe cannot be read twice).
 */
export async function checkSource(
  reader: SourceReader,
  decoder: RowDecoder,
  /**
   * A check of the header as a whole (columns known up front only): what it refuses is said in
   * one message with the decoder's column problems (RowDecoder.checkColumns).
   */
  checkHeader?: (columns: readonly string[]) => HeaderProblem | undefined,
): Promise<CheckedSource> {
  const iterator = reader[Symbol.asyncIterator]();
  const first = iterator.next();
  // Observed later by `items`; until then a failed read must not count as unhandled.
  first.catch(() => undefined);
  const header = columnsUpFront(reader) && reader.headerRead ? reader.headerRead() : undefined;
  const step = await Promise.race(header ? [first, header.then(() => undefined)] : [first]);
  try {
    if (step?.done === true && reader.columns.length === 0 && reader.format !== 'json') {
      throw new CrmSyncError('INPUT_EMPTY', 'the file is empty: it has no header and no rows');
    }
    const header = checkHeader && columnsUpFront(reader) ? checkHeader(reader.columns) : undefined;
    decoder.checkColumns(reader.columns, columnsUpFront(reader), header);
  } catch (err) {
    // Refused before its rows are read: the reader's file or database connection is let go
    // (after the read in flight, which the generator finishes first).
    iterator.return?.().catch(() => undefined);
    throw err;
  }
  let used = false;
  let ended = false;
  const close = async (): Promise<void> => {
    if (ended) return;
    ended = true;
    await iterator.return?.().catch(() => undefined);
  };
  return {
    items: {
      [Symbol.asyncIterator]: async function* () {
        if (used) throw new Error('a checked source is read once');
        used = true;
        try {
          for (let step = await first; step.done !== true; step = await iterator.next()) yield step.value;
          ended = true;
        } finally {
          // A consumer that breaks (a cancelled run) or throws leaves the reader paused at a
          // yield: its own finally (closing the file, ending the database session) runs only
          // when it is returned.
          await close();
        }
      },
    },
    close,
  };
}

async function* decodeAll(items: AsyncIterable<SourceItem>, decoder: RowDecoder): AsyncGenerator<IngestedRow> {
  for await (const item of items) yield decoder.decode(item);
}

/**
 * A file (or an opened reader: a database query) → one IngestedRow per input row, streamed,
 * with the one RowDecoder of (op, mapping). Mapping mistakes, option mistakes, an empty file
 * and columns that do not fit are thrown here, before any run exists; problems later in the
 * source are thrown by `rows`.
 */
export async function ingest(
  source: string | SourceReader,
  options: IngestOptions,
): Promise<{ reader: SourceReader; decoder: RowDecoder; rows: AsyncIterable<IngestedRow>; close(): Promise<void> }> {
  const { op, mapping, ignoreUnknownColumns, extraColumns, loadReferences, references, ...readOptions } = options;
  const decoder = new RowDecoder({
    op,
    ...(mapping ? { mapping } : {}),
    ...(ignoreUnknownColumns ? { ignoreUnknownColumns } : {}),
    ...(extraColumns ? { extraColumns } : {}),
    ...(references ? { references } : {}),
  });
  const lists = references ? [] : decoder.referenceLists();
  if (lists.length > 0 && loadReferences === undefined)
    throw new CrmSyncError(
      'USAGE',
      `the mapping names references by name ("by": "name"), which this path cannot read from the CRM. Nothing was sent.`,
    );
  const crmValues = decoder.needsCrmValues();
  if (crmValues.length > 0)
    throw new CrmSyncError(
      'USAGE',
      `the mapping's write policies need the CRM's current values, which a plain import does not read: ${crmValues.join('; ')}. ` +
        'Import with --reconcile (or run it as a nightly sync), or set "write": "always". Nothing was sent.',
    );
  const reader = typeof source === 'string' ? openSource(source, readOptions) : source;
  // An update source without ids: one sentence for the file, not "id: is required" per row
  // (its key columns are not refused as mapping to no field).
  const { items, close } = await checkSource(reader, decoder, (columns) =>
    idColumnProblem(decoder, columns, reader.format === 'postgres' ? 'query' : 'file'),
  );
  if (lists.length > 0 && loadReferences !== undefined) {
    try {
      // Every row is checked before anything is sent: the names are read before the first row.
      decoder.useReferences(await loadReferences(lists));
    } catch (err) {
      await close();
      throw err;
    }
  }
  return { reader, decoder, rows: { [Symbol.asyncIterator]: () => decodeAll(items, decoder) }, close };
}
