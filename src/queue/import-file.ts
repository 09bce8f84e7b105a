import type { Operation } from '../crm/index.js';
import { errorMessage } from '../errors/index.js';
import { ingest, type Mapping, type SourceFormat, type SourceReader } from '../ingest/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { produceRun, type ProducerOptions, type ProducerProgress } from './producer.js';
import type { WorkspaceQueue } from './workspace-queue.js';

export interface ImportFileOptions extends Pick<ProducerOptions, 'chunkSize' | 'highWaterMark' | 'inviteBatchSize' | 'dryRun' | 'logger'> {
  file: string;
  op: Operation;
  workspace: string;
  queue: WorkspaceQueue;
  store: RunStore;
  mapping?: { mapping: Mapping; raw: unknown };
  format?: SourceFormat;
  delimiter?: string;
  syncName?: string;
  /** Called with the run as soon as it exists (to print its id before the long part). */
  onRun?: (run: RunRecord, reader: SourceReader) => void;
  onProgress?: (progress: ProducerProgress, reader: SourceReader) => void;
}

/**
 * One-off import: creates the run, streams the file through ingest into the queue, and marks
 * the run producer-done. A file that cannot be read at all fails the run with the reason.
 */
export async function importFile(options: ImportFileOptions): Promise<{ run: RunRecord; progress: ProducerProgress }> {
  const { reader, rows } = ingest(options.file, {
    op: options.op,
    ...(options.mapping ? { mapping: options.mapping.mapping } : {}),
    ...(options.format ? { format: options.format } : {}),
    ...(options.delimiter ? { delimiter: options.delimiter } : {}),
  });
  const run = await options.store.createRun({
    workspace: options.workspace,
    operation: options.op,
    source: options.file,
    ...(options.syncName ? { syncName: options.syncName } : {}),
    options: {
      format: reader.format,
      ...(options.delimiter ? { delimiter: options.delimiter } : {}),
      ...(options.mapping ? { mapping: options.mapping.raw } : {}),
      ...(options.dryRun ? { dryRun: true } : {}),
      ...(options.inviteBatchSize ? { inviteBatchSize: options.inviteBatchSize } : {}),
    },
  });
  options.onRun?.(run, reader);
  let progress: ProducerProgress;
  try {
    progress = await produceRun(rows, {
      queue: options.queue,
      store: options.store,
      runId: run.id,
      ...pick(options),
      onProgress: (p) => options.onProgress?.(p, reader),
    });
  } catch (err) {
    await options.store.setColumns(run.id, reader.columns);
    await options.store.setStatus(run.id, 'failed', errorMessage(err));
    throw err;
  }
  await options.store.setColumns(run.id, reader.columns);
  return { run: await options.store.finishProducing(run.id), progress };
}

function pick(o: ImportFileOptions): Partial<ProducerOptions> {
  const out: Partial<ProducerOptions> = {};
  if (o.chunkSize !== undefined) out.chunkSize = o.chunkSize;
  if (o.highWaterMark !== undefined) out.highWaterMark = o.highWaterMark;
  if (o.inviteBatchSize !== undefined) out.inviteBatchSize = o.inviteBatchSize;
  if (o.dryRun !== undefined) out.dryRun = o.dryRun;
  if (o.logger !== undefined) out.logger = o.logger;
  return out;
}
