import { DEFAULTS } from '../config/index.js';
import type { Mapping, Source, SourceReader } from '../ingest/index.js';
import type { CreateRunInput, RunOptions, RunRecord, RunStore } from '../runs/index.js';
import { produceRun, type ProducedRow, type ProducerOptions, type ProducerProgress } from './producer.js';
import { runLife } from './run-life.js';

export interface ProduceSourceOptions extends Omit<
  ProducerOptions,
  'runId' | 'store' | 'onProgress' | 'requeued' | 'generation'
> {
  store: RunStore;
  /** The run to create (its columns come from the reader at the end). */
  run: Omit<CreateRunInput, 'columns'>;
  reader: SourceReader;
  /** The rows to produce, once the run exists (reconcile builds its index first); `signal` is the run's stop. */
  rows: (run: RunRecord, signal: AbortSignal) => AsyncIterable<ProducedRow> | Promise<AsyncIterable<ProducedRow>>;
  onRun?: (run: RunRecord, reader: SourceReader) => void;
  onProgress?: (progress: ProducerProgress, reader: SourceReader) => void;
}

/**
 * Run options every source-based run records, so a retry maps rows the same way and a resume
 * reads the source the same way (what the source itself records: Source.facts).
 */
export function sourceRunOptions(
  source: Source,
  o: {
    mapping?: { mapping: Mapping; raw: unknown } | undefined;
    dryRun?: boolean | undefined;
    ignoreUnknownColumns?: boolean | undefined;
    /** The run's short name (`import --name`). */
    label?: string | undefined;
  },
): RunOptions {
  return {
    ...(o.label ? { label: o.label } : {}),
    ...source.facts(),
    ...(o.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
    ...(o.mapping ? { mapping: o.mapping.raw } : {}),
    ...(o.dryRun ? { dryRun: true } : {}),
  };
}

/**
 * A source-based run (a file or a query): created, its rows streamed into the queue, its columns recorded and
 * producer-done set, through the run's one owner (run-life.ts): a failure fails the run with
 * the reason, a cancel stops the reading.
 */
export async function produceSource(
  options: ProduceSourceOptions,
): Promise<{ run: RunRecord; progress: ProducerProgress }> {
  const { store, reader, run: input, rows, onRun, onProgress, signal, ...producer } = options;
  // Recorded so a retry of the run batches its rows as the first pass did.
  const rowsPerJob = producer.rowsPerJob ?? DEFAULTS.producer.rowsPerJob;
  return runLife({
    store,
    ...(signal ? { signal } : {}),
    ...(producer.logger ? { logger: producer.logger } : {}),
    columns: () => reader.columns,
    start: async () => {
      const run = await store.createRun(
        rowsPerJob > 1 ? { ...input, options: { ...input.options, rowsPerJob } } : input,
      );
      onRun?.(run, reader);
      return run;
    },
    produce: async (run, stop) =>
      produceRun(await rows(run, stop), {
        ...producer,
        rowsPerJob,
        store,
        runId: run.id,
        signal: stop,
        sourceColumns: () => reader.columns,
        onProgress: (p) => onProgress?.(p, reader),
      }),
  });
}
