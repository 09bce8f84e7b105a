import { once } from 'node:events';
import { AuthError, defaultMatchKey as matchKeyOf, refusedKeyStatus, type CrmClient } from '../crm/index.js';
import {
  asSource,
  checkSource,
  type CheckedSource,
  columnsUpFront,
  type Mapping,
  type RowDecoder,
  type Source,
  type SourceFormat,
  type SourceReader,
} from '../ingest/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import { produceSource, sourceRunOptions, type ProducerProgress, type RunStop } from '../lifecycle/index.js';
import { type WorkspaceQueue } from '../queue/index.js';
import { type RequestBudget } from '../rate/index.js';
import type { RunRecord, RunStore } from '../runs/index.js';
import { emptyPlanCounts, planCsvHeader, planCsvLine, type PlanCounts } from './plan-csv.js';
import { checkKeyColumn, planRows, reconcileDecoder, type PlannedRow } from './plan-rows.js';
import { RecordIndex } from './record-index.js';
import { PlanTally, type PlanSummary } from './plan-tally.js';
import { RECONCILE_RESOURCE, type ReconcileOperation } from './resource-fields.js';

export interface ReconcileSourceOptions {
  /** A file's path (read with `format` and `delimiter`), or an opened Source (stdin, a database query): planned alike. */
  file: string | Source;
  op: ReconcileOperation;
  workspace: string;
  /** Client of the workspace; its listVersion decides v1/v2 unless `listVersion` is given. */
  client: CrmClient;
  /** The workspace's shared request budget: every list page takes a token. Default: pages are not budgeted. */
  budget?: RequestBudget;
  /** Default: `email` for contacts and leads, `unique_number` for deal updates, `name` for deal upserts. */
  matchKey?: string;
  /** Source column holding the key. Default: the column mapped to the key's field, else one named like it. */
  keyColumn?: string;
  /** Default: columns named like the API fields. */
  mapping?: { mapping: Mapping; raw: unknown };
  /** Default: from the file extension. */
  format?: SourceFormat;
  /** CSV delimiter. Default: sniffed from the header line. */
  delimiter?: string;
  /** Skip columns that map to no field instead of refusing the file. Default false. */
  ignoreUnknownColumns?: boolean;
  /** Called once the file's columns passed their checks, before the run is created or the CRM paged. */
  onChecked?: (reader: SourceReader, decoder: RowDecoder) => void;
  /** Records per list page. Default 100. */
  pageSize?: number;
  /** Default: the client's. */
  listVersion?: 'v1' | 'v2';
  /** Default: silent. */
  logger?: Logger;
}

export interface IndexStats {
  pages: number;
  records: number;
  ms: number;
}

export function defaultMatchKey(op: ReconcileOperation): string {
  return matchKeyOf(op);
}

/** Pages the resource the operation writes into an index by the match key. */
export async function buildIndexFor(
  options: ReconcileSourceOptions & { keepPlaces?: boolean },
): Promise<{ index: RecordIndex; stats: IndexStats }> {
  const started = Date.now();
  const { budget } = options;
  const index = await RecordIndex.build(options.client, {
    resource: RECONCILE_RESOURCE[options.op],
    matchKey: options.matchKey ?? defaultMatchKey(options.op),
    ...(options.pageSize !== undefined ? { pageSize: options.pageSize } : {}),
    ...(options.listVersion ? { version: options.listVersion } : {}),
    ...(budget ? { beforeFetch: () => budget.take() } : {}),
    ...(options.keepPlaces ? { keepPlaces: true } : {}),
  });
  return { index, stats: { pages: index.pages, records: index.size, ms: Date.now() - started } };
}

/**
 * Opens the source and checks it against the reconcile's one decoder (columns, key column, an
 * empty file) before a run exists or a page of the CRM is read.
 */
async function openChecked(
  options: ReconcileSourceOptions,
): Promise<{ source: Source; reader: SourceReader; decoder: RowDecoder } & CheckedSource> {
  const matchKey = options.matchKey ?? defaultMatchKey(options.op);
  const source = asSource(options.file, {
    ...(options.format ? { format: options.format } : {}),
    ...(options.delimiter ? { delimiter: options.delimiter } : {}),
  });
  const reader = source.reader;
  const planning = { op: options.op, matchKey, refColumn: source.keyColumn, ...mappingOf(options) };
  const decoder = reconcileDecoder(planning);
  const checked = await checkSource(reader, decoder);
  try {
    if (columnsUpFront(reader)) checkKeyColumn(decoder, reader.columns, planning);
    options.onChecked?.(reader, decoder);
  } catch (err) {
    await checked.close();
    throw err;
  }
  return { source, reader, decoder, ...checked };
}

export interface PlanReconcileOptions extends ReconcileSourceOptions {
  /** Where the plan CSV goes (one line per row). Default: nowhere. */
  out?: NodeJS.WritableStream;
  /**
   * Called with every planned row, in source order (`crm-sync plan` stores them), and its
   * record's place in the CRM's list as read (with `keepPlaces`). Default: none.
   */
  onRow?: (row: PlannedRow, place: number | undefined) => void | Promise<void>;
  /** Keep each record's place in the list for onRow (RecordIndex.placeOf). Default false. */
  keepPlaces?: boolean;
}

export interface PlanResult {
  counts: PlanCounts;
  rows: number;
  index: IndexStats;
  /** Per field: rows that change it, empty it, or have it held back by a write policy. */
  summary: PlanSummary;
}

/** Reconcile without sending: what each row would do, as counts and (optionally) a CSV. */
export async function planReconcile(options: PlanReconcileOptions): Promise<PlanResult> {
  const { decoder, items, close } = await openChecked(options);
  try {
    const { index, stats } = await buildIndexFor(options);
    const counts = emptyPlanCounts();
    const tally = new PlanTally();
    let rows = 0;
    // A line is only made for a CSV someone reads: without `out`, making 100,000 of them was a
    // fifth of a plan's allocations (bench/RESULTS.md, "Change control").
    const { out } = options;
    const write = async (text: () => string) => {
      if (out && !out.write(text())) await once(out, 'drain');
    };
    await write(planCsvHeader);
    for await (const row of planRows(items, { op: options.op, index, ...mappingOf(options) }, decoder)) {
      rows++;
      counts[row.action]++;
      tally.add(row);
      await options.onRow?.(row, row.recordId !== undefined ? index.placeOf(row.recordId) : undefined);
      await write(() => planCsvLine(row));
    }
    return { counts, rows, index: stats, summary: tally.summary() };
  } finally {
    await close();
  }
}

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
 * real changes (and an upsert's creates) are queued.
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
        built = await buildIndexFor({ ...options, matchKey });
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

function mappingOf(options: ReconcileSourceOptions): {
  mapping?: Mapping;
  keyColumn?: string;
  ignoreUnknownColumns?: boolean;
} {
  return {
    ...(options.mapping ? { mapping: options.mapping.mapping } : {}),
    ...(options.keyColumn !== undefined ? { keyColumn: options.keyColumn } : {}),
    ...(options.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
  };
}
