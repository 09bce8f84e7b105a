import { CrmSyncError } from '../errors/index.js';
import { openSource } from './open-source.js';
import { RowDecoder, type IngestedRow, type RowDecoderOptions } from './row-decoder.js';
import type { ReadSourceOptions, SourceItem, SourceReader } from './source-types.js';

export interface IngestOptions extends ReadSourceOptions, RowDecoderOptions {}

/** What the first look at a file found, before any run exists. */
export interface SourcePreview {
  /** False for a header-only CSV or an empty JSON array: the run will have 0 data rows. */
  hasRows: boolean;
}

/**
 * Reads up to the first row: the header (or the first JSON row's keys) is checked against the
 * decoder, and a file with nothing in it is refused (INPUT_EMPTY), so these mistakes end the
 * command before a run is created. The next iteration reads the file again from the start.
 */
export async function previewSource(reader: SourceReader, decoder: RowDecoder): Promise<SourcePreview> {
  let first: SourceItem | undefined;
  for await (const item of reader) {
    first = item;
    break;
  }
  if (first === undefined && reader.columns.length === 0 && reader.format !== 'json') {
    throw new CrmSyncError('INPUT_EMPTY', 'the file is empty: it has no header and no rows');
  }
  decoder.checkColumns(reader.columns, reader.format === 'csv');
  return { hasRows: first !== undefined };
}

async function* decodeAll(reader: SourceReader, decoder: RowDecoder): AsyncGenerator<IngestedRow> {
  for await (const item of reader) yield decoder.decode(item);
}

/**
 * A file → one IngestedRow per input row, streamed, with the one RowDecoder of (op, mapping).
 * Mapping mistakes, option mistakes, an empty file and columns that do not fit are thrown
 * here, before any run exists; problems later in the file are thrown by `rows`.
 */
export async function ingest(
  path: string,
  options: IngestOptions,
): Promise<{ reader: SourceReader; decoder: RowDecoder; preview: SourcePreview; rows: AsyncIterable<IngestedRow> }> {
  const { op, mapping, ignoreUnknownColumns, extraColumns, ...readOptions } = options;
  const decoder = new RowDecoder({
    op,
    ...(mapping ? { mapping } : {}),
    ...(ignoreUnknownColumns ? { ignoreUnknownColumns } : {}),
    ...(extraColumns ? { extraColumns } : {}),
  });
  const reader = openSource(path, readOptions);
  const preview = await previewSource(reader, decoder);
  return { reader, decoder, preview, rows: { [Symbol.asyncIterator]: () => decodeAll(reader, decoder) } };
}
