import { statSync } from 'node:fs';
import { readCsv } from './csv-reader.js';
import { readJsonArray } from './json-reader.js';
import { readNdjson } from './ndjson-reader.js';
import type { ReaderContext, SourceFormat, SourceItem, SourceReader } from './source-types.js';
import { readTextChunks } from './text-chunks.js';

export interface FileSourceReaderSettings {
  path: string;
  format: SourceFormat;
  delimiter: string;
  delimiterGuessed: boolean;
  maxRecordBytes: number;
  maxColumns: number;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const READERS = {
  csv: readCsv,
  ndjson: readNdjson,
  json: readJsonArray,
} as const satisfies Record<
  SourceFormat,
  (text: AsyncIterable<string>, ctx: ReaderContext) => AsyncGenerator<SourceItem>
>;

/**
 * A file as an async iterable of rows. Each iteration reads the file afresh (row numbers are
 * the same every time); `columns` and `bytesRead` describe the iteration in progress.
 */
export class FileSourceReader implements SourceReader {
  readonly format: SourceFormat;
  readonly delimiter?: string;
  readonly delimiterGuessed?: boolean;
  readonly totalBytes: number;
  private cols: string[] = [];
  private read = 0;
  private header: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(private readonly settings: FileSourceReaderSettings) {
    this.format = settings.format;
    if (settings.format === 'csv') {
      this.delimiter = settings.delimiter;
      this.delimiterGuessed = settings.delimiterGuessed;
    }
    let size = 0;
    try {
      size = statSync(settings.path).size;
    } catch {
      // Reported as INPUT_UNREADABLE by the iterator, where fatal errors belong.
    }
    this.totalBytes = size;
  }

  get columns(): string[] {
    return this.cols;
  }

  get bytesRead(): number {
    return this.read;
  }

  headerRead(): Promise<void> {
    this.header ??= deferred();
    return this.header.promise;
  }

  [Symbol.asyncIterator](): AsyncIterator<SourceItem> {
    this.cols = [];
    this.read = 0;
    const header = deferred();
    this.header = header;
    const { path, delimiter, maxRecordBytes, maxColumns } = this.settings;
    const ctx: ReaderContext = {
      name: path,
      delimiter,
      maxRecordBytes,
      maxColumns,
      columns: this.cols,
      onHeader: header.resolve,
    };
    const text = readTextChunks(path, (n) => {
      this.read += n;
    });
    return READERS[this.format](text, ctx);
  }
}
