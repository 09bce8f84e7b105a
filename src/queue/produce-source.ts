import { CrmSyncError, errorMessage } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { Mapping, SourceReader } from '../ingest/index.js';
import type { CreateRunInput, RunOptions, RunRecord, RunStore } from '../runs/index.js';
import { keepProducerAlive } from './producer-heartbeat.js';
import { produceRun, type ProducedRow, type ProducerOptions, type ProducerProgress } from './producer.js';
import { rideOutRedis } from './ride-out-redis.js';

export interface ProduceSourceOptions extends Omit<ProducerOptions, 'runId' | 'store' | 'onProgress' | 'requeued' | 'generation'> {
  store: RunStore;
  /** The run to create (its columns come from the reader at the end). */
  run: Omit<CreateRunInput, 'columns'>;
  reader: SourceReader;
  /** The rows to produce, once the run exists (reconcile builds its index first). */
  rows: (run: RunRecord) => AsyncIterable<ProducedRow> | Promise<AsyncIterable<ProducedRow>>;
  onRun?: (run: RunRecord, reader: SourceReader) => void;
  onProgress?: (progress: ProducerProgress, reader: SourceReader) => void;
}

/** The producer's last steps, which a Redis restart must not turn into a failed run. */
export async function finishRun(store: RunStore, runId: string, columns: string[], logger: Logger = silentLogger): Promise<RunRecord> {
  const giveUp = (waited: number, last: unknown) =>
    new CrmSyncError('REDIS_LOST', `Redis did not answer for ${Math.round(waited / 1000)} s as run ${runId} finished reading; resume it with: crm-sync runs resume ${runId}`, { cause: last });
  await rideOutRedis(() => store.setColumns(runId, columns), { logger, giveUp });
  return rideOutRedis(() => store.finishProducing(runId), { logger, giveUp });
}

/** Run options every file-based run records, so a retry reads and maps rows the same way. */
export function sourceRunOptions(
  reader: SourceReader,
  o: { mapping?: { mapping: Mapping; raw: unknown } | undefined; dryRun?: boolean | undefined; ignoreUnknownColumns?: boolean | undefined },
): RunOptions {
  return {
    format: reader.format,
    // The delimiter read with (given or sniffed), so a resume reads the file the same way.
    ...(reader.delimiter !== undefined ? { delimiter: reader.delimiter } : {}),
    ...(o.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
    ...(o.mapping ? { mapping: o.mapping.raw } : {}),
    ...(o.dryRun ? { dryRun: true } : {}),
  };
}

/**
 * The life of a file-based run: create it, stream its rows into the queue, record the source's
 * columns and mark it producer-done. If producing fails (the file turns out unreadable, Redis
 * goes away), the run is marked failed with the reason before the error propagates.
 */
export async function produceSource(options: ProduceSourceOptions): Promise<{ run: RunRecord; progress: ProducerProgress }> {
  const { store, reader, run: input, rows, onRun, onProgress, ...producer } = options;
  // Recorded so a retry of the run batches its rows as the first pass did.
  const rowsPerJob = producer.rowsPerJob ?? 1;
  const run = await store.createRun(rowsPerJob > 1 ? { ...input, options: { ...input.options, rowsPerJob } } : input);
  onRun?.(run, reader);
  const stopHeartbeat = keepProducerAlive(store, run.id);
  let progress: ProducerProgress;
  try {
    progress = await produceRun(await rows(run), { ...producer, store, runId: run.id, onProgress: (p) => onProgress?.(p, reader) });
  } catch (err) {
    // Best effort: when Redis is what failed, the workers' sweep fails the run later instead.
    await store.setColumns(run.id, reader.columns).catch(() => undefined);
    await store.setStatus(run.id, 'failed', errorMessage(err)).catch(() => undefined);
    throw err;
  } finally {
    stopHeartbeat();
  }
  return { run: await finishRun(store, run.id, reader.columns, producer.logger), progress };
}
