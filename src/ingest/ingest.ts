import type { Operation, OperationPayload } from '../crm/index.js';
import type { FieldError } from '../runs/index.js';
import { labelOf, mapRow } from './map-row.js';
import { assertKnownColumns, rulesFor, type Mapping } from './mapping.js';
import { openSource } from './open-source.js';
import type { ReadSourceOptions, SourceItem, SourceReader } from './source-types.js';
import { ROW_FIELD, validateRow } from './validate-row.js';

export interface IngestOptions extends ReadSourceOptions {
  op: Operation;
  /** Default: columns named like the operation's API fields map themselves. */
  mapping?: Mapping;
}

/** One input row, ready for the producer: a payload to send XOR the errors to record. */
export interface IngestedRow {
  row: number;
  line: number;
  original: Record<string, string>;
  payload?: OperationPayload;
  code?: 'ROW_INVALID' | 'INPUT_PARSE' | 'INPUT_TOO_LARGE';
  errors?: FieldError[];
}

/**
 * One row's values → a payload, or field errors named by source column. Used for every row of
 * a file and on its own by retries (which re-map stored or corrected originals).
 */
export function ingestValues(
  op: Operation,
  values: Record<string, unknown>,
  mapping?: Mapping,
): { payload?: OperationPayload; errors?: FieldError[] } {
  const mapped = mapRow(op, values, mapping);
  const checked = validateRow(op, mapped.fields);
  if (checked.ok && mapped.errors.length === 0) return { payload: checked.payload };
  const labels = new Map(rulesFor(op, mapping).map((r) => [r.field, labelOf(r)]));
  const failedCoercion = new Set(mapped.errors.map((e) => e.field));
  const errors = [...mapped.errors];
  if (!checked.ok) {
    for (const e of checked.errors) {
      const field = labels.get(e.field) ?? e.field;
      // A cell that failed coercion was left out; "is required" on top of its reason is noise.
      if (!failedCoercion.has(field)) errors.push({ field, message: e.message });
    }
  }
  return { errors };
}

function fromItem(op: Operation, item: SourceItem, mapping: Mapping | undefined): IngestedRow {
  const { row, line, original } = item;
  if (item.kind === 'problem') return { row, line, original, code: item.code, errors: [{ field: ROW_FIELD, message: item.message }] };
  const { payload, errors } = ingestValues(op, item.values, mapping);
  return payload !== undefined ? { row, line, original, payload } : { row, line, original, code: 'ROW_INVALID', errors: errors ?? [] };
}

async function* ingestRows(reader: SourceReader, op: Operation, mapping: Mapping | undefined): AsyncGenerator<IngestedRow> {
  let checkedColumns = 0;
  for await (const item of reader) {
    if (mapping !== undefined && reader.columns.length > checkedColumns) {
      // JSON sources reveal columns as they go; each new one is checked before its row is used.
      assertKnownColumns(mapping, reader.columns.slice(checkedColumns));
      checkedColumns = reader.columns.length;
    }
    yield fromItem(op, item, mapping);
  }
}

/**
 * A file → one IngestedRow per input row, streamed. A mapping that does not fit `op` and
 * option mistakes throw here; problems with the file itself are thrown by `rows`.
 */
export function ingest(path: string, options: IngestOptions): { reader: SourceReader; rows: AsyncIterable<IngestedRow> } {
  const { op, mapping, ...readOptions } = options;
  rulesFor(op, mapping);
  const reader = openSource(path, readOptions);
  return { reader, rows: { [Symbol.asyncIterator]: () => ingestRows(reader, op, mapping) } };
}
