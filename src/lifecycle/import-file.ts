import type { Operation } from '../crm/index.js';
import {
  asSource,
  fileIdentity,
  ingest,
  type LoadReferences,
  type Mapping,
  type RowDecoder,
  type Source,
  type SourceFormat,
  type SourceReader,
} from '../ingest/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { produceSource, sourceRunOptions } from './produce-source.js';
import type { ProducerOptions, ProducerProgress } from './producer.js';
import type { WorkspaceQueue } from '../queue/index.js';

export interface ImportFileOptions extends Pick<
  ProducerOptions,
  | 'chunkSize'
  | 'highWaterMark'
  | 'inviteBatchSize'
  | 'rowsPerJob'
  | 'dryRun'
  | 'logger'
  | 'redisOutageMs'
  | 'redisWatch'
> {
  /** A short name for the run (`import --name`), shown where it is listed. Default: the source's. */
  label?: string;
  /**
   * A file's path (read with `format` and `delimiter`), or an opened Source (stdin, a database
   * query): all are read by the same decoder; the run records what the source says of itself.
   */
  file: string | Source;
  op: Operation;
  workspace: string;
  queue: WorkspaceQueue;
  store: RunStore;
  mapping?: { mapping: Mapping; raw: unknown };
  format?: SourceFormat;
  delimiter?: string;
  /** Where a mapping's names resolve from (ingest's LoadReferences). Default: a mapping with names is refused. */
  loadReferences?: LoadReferences;
  /** Skip columns that map to no field instead of refusing the file. Default false. */
  ignoreUnknownColumns?: boolean;
  syncName?: string;
  /** Called once the file's columns passed their check, before the run is created. */
  onChecked?: (reader: SourceReader, decoder: RowDecoder) => void;
  /** Called with the run as soon as it exists (to print its id before the long part). */
  onRun?: (run: RunRecord, reader: SourceReader) => void;
  onProgress?: (progress: ProducerProgress, reader: SourceReader) => void;
}

/** A file's size and mtime now, as a run records them (verify compares them): see fileIdentity. */
export const sourceIdentity = fileIdentity;

/**
 * One-off import: every row of the file (or query) is validated and, when valid, queued as it is (no
 * comparison with the CRM; see reconcile for that). A file that cannot be read fails the run.
 */
export async function importFile(options: ImportFileOptions): Promise<{ run: RunRecord; progress: ProducerProgress }> {
  const {
    file,
    op,
    workspace,
    mapping,
    format,
    delimiter,
    ignoreUnknownColumns,
    syncName,
    onChecked,
    label,
    loadReferences,
    ...rest
  } = options;
  const source = asSource(file, { ...(format ? { format } : {}), ...(delimiter ? { delimiter } : {}) });
  const { reader, decoder, rows, close } = await ingest(source.reader, {
    op,
    ...(mapping ? { mapping: mapping.mapping } : {}),
    ...(ignoreUnknownColumns ? { ignoreUnknownColumns } : {}),
    ...(loadReferences ? { loadReferences } : {}),
    // A database source's key column names the row; the source reads it, no field takes it.
    ...(source.keyColumn !== undefined ? { extraColumns: [source.keyColumn] } : {}),
  });
  try {
    onChecked?.(reader, decoder);
    return await produceSource({
      ...rest,
      reader,
      rows: () => rows,
      run: {
        workspace,
        operation: op,
        source: source.label,
        ...(syncName ? { syncName } : {}),
        options: {
          ...sourceRunOptions(source, { mapping, dryRun: options.dryRun, ignoreUnknownColumns, label }),
          ...(options.inviteBatchSize ? { inviteBatchSize: options.inviteBatchSize } : {}),
        },
      },
    });
  } finally {
    // The run could not start (or stopped early): the file or database session is let go.
    await close();
  }
}
