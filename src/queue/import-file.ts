import { statSync } from 'node:fs';
import type { Operation } from '../crm/index.js';
import {
  ingest,
  type Mapping,
  type PostgresSourceReader,
  type RowDecoder,
  type SourceFormat,
  type SourceReader,
} from '../ingest/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { produceSource, sourceLabel, sourceRunOptions } from './produce-source.js';
import type { ProducerOptions, ProducerProgress } from './producer.js';
import type { WorkspaceQueue } from './workspace-queue.js';

export interface ImportFileOptions extends Pick<
  ProducerOptions,
  'chunkSize' | 'highWaterMark' | 'inviteBatchSize' | 'rowsPerJob' | 'dryRun' | 'logger' | 'redisOutageMs'
> {
  /** A short name for the run (`import --name`), shown where it is listed. Default: the source's. */
  label?: string;
  /**
   * A file's path, or an opened database query (openPostgresSource): both are read by the same
   * decoder; a query's run records the query (not the URL) and its rows' keys.
   */
  file: string | PostgresSourceReader;
  op: Operation;
  workspace: string;
  queue: WorkspaceQueue;
  store: RunStore;
  mapping?: { mapping: Mapping; raw: unknown };
  format?: SourceFormat;
  delimiter?: string;
  /** Skip columns that map to no field instead of refusing the file. Default false. */
  ignoreUnknownColumns?: boolean;
  syncName?: string;
  /** Called once the file's columns passed their check, before the run is created. */
  onChecked?: (reader: SourceReader, decoder: RowDecoder) => void;
  /** Called with the run as soon as it exists (to print its id before the long part). */
  onRun?: (run: RunRecord, reader: SourceReader) => void;
  onProgress?: (progress: ProducerProgress, reader: SourceReader) => void;
}

/** What a resume checks to be sure it reads the same file (nothing for a query: it is never resumed). */
export function sourceIdentity(file: string | SourceReader): { sourceSize?: number; sourceMtimeMs?: number } {
  if (typeof file !== 'string') return {};
  try {
    const st = statSync(file);
    return st.isFile() ? { sourceSize: st.size, sourceMtimeMs: Math.floor(st.mtimeMs) } : {};
  } catch {
    return {};
  }
}

/**
 * One-off import: every row of the file (or query) is validated and, when valid, queued as it is (no
 * comparison with the CRM; see reconcile for that). A file that cannot be read fails the run.
 */
export async function importFile(options: ImportFileOptions): Promise<{ run: RunRecord; progress: ProducerProgress }> {
  const { file, op, workspace, mapping, format, delimiter, ignoreUnknownColumns, syncName, onChecked, label, ...rest } =
    options;
  const { reader, decoder, rows, close } = await ingest(file, {
    op,
    ...(mapping ? { mapping: mapping.mapping } : {}),
    ...(format ? { format } : {}),
    ...(delimiter ? { delimiter } : {}),
    ...(ignoreUnknownColumns ? { ignoreUnknownColumns } : {}),
    // A database source's key column names the row; the source reads it, no field takes it.
    ...(typeof file !== 'string' && file.spec.keyColumn !== undefined ? { extraColumns: [file.spec.keyColumn] } : {}),
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
        source: sourceLabel(file),
        ...(syncName ? { syncName } : {}),
        options: {
          ...sourceRunOptions(reader, { mapping, dryRun: options.dryRun, ignoreUnknownColumns, label }),
          ...sourceIdentity(file),
          ...(options.inviteBatchSize ? { inviteBatchSize: options.inviteBatchSize } : {}),
        },
      },
    });
  } finally {
    // The run could not start (or stopped early): the file or database session is let go.
    await close();
  }
}
