import { AuthError, refusedKeyStatus } from '../crm/index.js';
import { silentLogger } from '../log/index.js';
import { produceSource, sourceRunOptions, type ProducerProgress, type RunStop } from '../lifecycle/index.js';
import { type WorkspaceQueue } from '../queue/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { emptyPlanCounts, type PlanCounts } from './plan-csv.js';
import { planRows, type PlannedRow } from './plan-rows.js';
import {
  buildIndexFor,
  defaultMatchKey,
  mappingOf,
  openChecked,
  type IndexStats,
  type ReconcileSourceOptions,
} from './plan-reconcile.js';

export interface ReconcileImportOptions extends ReconcileSourceOptions {
  queue: WorkspaceQueue;
  store: RunStore;
  /** A short name for the run (`import --name`); sourceRunOptions records it. */
  label?: string;
  /** Set for runs of a nightly sync. Default none. */
  syncName?: string;
  /** Plan and record only: rows that would be sent end `skipped` ("dry run"). Default false. */
  dryRun?: boolean;
  /** Producer settings; defaults as in produceRun. */
  chunkSize?: number;
  highWaterMark?: number;
  rowsPerJob?: number;
  /**
   * The caller's stop (a nightly sync's maxFailures, its lock lost), with a RunStop as its
   * reason: every remaining row that would be sent is recorded as stopped (not sent). A cancel
   * of the run is seen by the run's owner (run-life.ts) as well. Default: none.
   */
  signal?: AbortSignal;
  /**
   * Abort the run (RUN_ABORTED) once this many rows matched no record or several: the file
   * and the CRM disagree too much for the rest to be trusted. Default: never.
   */
  abortAfterUnmatched?: number;
  /** Called with the run as soon as it exists. */
  onRun?: (run: RunRecord) => void;
}

export interface ReconcileImportResult {
  run: RunRecord;
  progress: ProducerProgress;
  counts: PlanCounts;
  index: IndexStats;
}

/**
 * A reconciled run: create the run, page the CRM into an index, plan every row and hand the
 * rows to the producer — unchanged, unmatched and ambiguous rows are recorded at once, only
 * real changes (and an upsert's creates) are queued. Each update carries the values the index
 * read for the fields it changes (QueuedRow.expect): the worker's drift check sends it only while
 * the record still holds them, as for an applied plan's row, and a record changed since ends
 * `drifted` (a person's value filled in after the read is never overwritten, "if-empty" or not).
 *
 * If the CRM refuses the API key while the index is paged, the run ends `blocked` (as a 401
 * blocks a run in the workers) with no rows read; the result's run says so. Any other error
 * fails the run and is thrown.
 */
export async function reconcileImport(options: ReconcileImportOptions): Promise<ReconcileImportResult> {
  const logger = options.logger ?? silentLogger;
  const matchKey = options.matchKey ?? defaultMatchKey(options.op);
  const { source, reader, decoder, items, close } = await openChecked({ ...options, matchKey });
  const counts = emptyPlanCounts();
  let index: IndexStats = { pages: 0, records: 0, ms: 0 };
  const unmatched = new AbortController();
  // The source is let go whatever happens: the CRM index failed or refused the key (no row is
  // read), the run was stopped, or it could not start.
  const { run, progress } = await produceSource({
    store: options.store,
    queue: options.queue,
    reader,
    logger,
    ...(options.dryRun ? { dryRun: true } : {}),
    ...(options.chunkSize !== undefined ? { chunkSize: options.chunkSize } : {}),
    ...(options.highWaterMark !== undefined ? { highWaterMark: options.highWaterMark } : {}),
    ...(options.rowsPerJob !== undefined ? { rowsPerJob: options.rowsPerJob } : {}),
    ...(options.onRun ? { onRun: options.onRun } : {}),
    signal: options.signal ? AbortSignal.any([options.signal, unmatched.signal]) : unmatched.signal,
    run: {
      workspace: options.workspace,
      operation: options.op,
      source: source.label,
      ...(options.syncName ? { syncName: options.syncName } : {}),
      options: { ...sourceRunOptions(source, options), reconcile: true, matchKey },
    },
    rows: async (created, stop) => {
      let built;
      try {
        // Places too: each update's drift check reads the page that held its record (QueuedRow.listPlace).
        built = await buildIndexFor({ ...options, matchKey, keepPlaces: true, decoder });
      } catch (err) {
        if (!(err instanceof AuthError)) throw err;
        await options.store.blockRun(created.id, indexAuthReason(options.workspace, err));
        logger.error(
          { runId: created.id, status: err.status },
          'the CRM refused the API key while the reconcile index was built: run blocked, nothing sent',
        );
        return noRows();
      }
      index = built.stats;
      logger.info({ runId: created.id, ...index }, 'reconcile index built');
      const limit = options.abortAfterUnmatched;
      const tooMany =
        limit === undefined
          ? undefined
          : () => {
              const n = counts['not-found'] + counts.ambiguous;
              if (n >= limit)
                unmatched.abort({
                  kind: 'aborted',
                  reason: `aborted: ${n} rows matched no record or several (maxFailures ${limit})`,
                } satisfies RunStop);
            };
      return counted(
        planRows(items, { op: options.op, index: built.index, ...mappingOf(options) }, decoder),
        counts,
        stop,
        tooMany,
      );
    },
  }).finally(close);
  return { run, progress, counts, index };
}

/**
 * What a run blocked while its index was paged says. Resuming it cannot help: it read no rows
 * and has none queued, and the plan needs a fresh index anyway — the sync has to run again.
 */
function indexAuthReason(workspace: string, error: AuthError): string {
  return (
    `The CRM refused the API key of workspace "${workspace}" (HTTP ${refusedKeyStatus(error)}: ${error.serviceMessage ?? error.message}) ` +
    `while the reconcile index was being built; no row was read or sent. Fix the key (restart the workers if it comes from an env variable), ` +
    `then run the sync again: resuming this run does nothing, the index has to be built again.`
  );
}

async function* noRows(): AsyncGenerator<PlannedRow> {}

/** Counts what the plan decided for rows that go on (the producer records stopped rows itself). */
async function* counted(
  rows: AsyncIterable<PlannedRow>,
  counts: PlanCounts,
  stop: AbortSignal,
  check?: () => void,
): AsyncGenerator<PlannedRow> {
  for await (const row of rows) {
    if (!(row.payload !== undefined && stop.aborted)) counts[row.action]++;
    check?.();
    yield row;
  }
}
