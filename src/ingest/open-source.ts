import { extname } from 'node:path';
import { CrmSyncError } from '../errors/index.js';
import { checkFileHead, sniffDelimiter } from './file-check.js';
import { FileSourceReader } from './file-source-reader.js';
import {
  DEFAULT_MAX_COLUMNS,
  DEFAULT_MAX_RECORD_BYTES,
  type ReadSourceOptions,
  type SourceFormat,
  type SourceReader,
} from './source-types.js';

const BY_EXTENSION: Record<string, { format: SourceFormat; delimiter?: string }> = {
  '.csv': { format: 'csv' },
  '.tsv': { format: 'csv', delimiter: '\t' },
  '.ndjson': { format: 'ndjson' },
  '.jsonl': { format: 'ndjson' },
  '.json': { format: 'json' },
};

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1)
    throw new CrmSyncError('USAGE', `${name} must be a whole number of 1 or more`);
  return value;
}

/**
 * Opens a CSV, NDJSON or JSON-array file for streaming. Option mistakes throw USAGE here, and
 * so does what can never be a row source (a directory, an empty file, a workbook or PDF);
 * everything else about the file (missing, not UTF-8, bad header) is thrown by the iterator.
 */
export function openSource(path: string, options: ReadSourceOptions = {}): SourceReader {
  const head = checkFileHead(path);
  const byExt = BY_EXTENSION[extname(path).toLowerCase()];
  const format = options.format ?? byExt?.format;
  if (format === undefined) {
    throw new CrmSyncError(
      'USAGE',
      `cannot tell the format of ${path} from its extension; pass --format csv, ndjson or json`,
    );
  }
  const fixed = options.delimiter ?? (format === byExt?.format ? byExt.delimiter : undefined);
  const delimiterGuessed = format === 'csv' && fixed === undefined && head !== undefined;
  const delimiter = fixed ?? (delimiterGuessed && head ? sniffDelimiter(head) : ',');
  if (delimiter.length !== 1 || delimiter === '"' || delimiter === '\n' || delimiter === '\r') {
    throw new CrmSyncError(
      'USAGE',
      `the delimiter must be one character other than a quote or a line break, not ${JSON.stringify(delimiter)}`,
    );
  }
  return new FileSourceReader({
    path,
    format,
    delimiter,
    delimiterGuessed,
    maxRecordBytes: positiveInt('maxRecordBytes', options.maxRecordBytes, DEFAULT_MAX_RECORD_BYTES),
    maxColumns: positiveInt('maxColumns', options.maxColumns, DEFAULT_MAX_COLUMNS),
  });
}
