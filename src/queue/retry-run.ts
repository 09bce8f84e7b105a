import type { Operation } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import { ingestValues, openSource, parseMapping, type IngestedRow, type Mapping } from '../ingest/index.js';
import { EXPORT_META_COLUMNS, unescapeCsvCell, type RunRecord, type RunStore } from '../runs/index.js';
import type { Logger } from '../log/index.js';
import { produceRun, type ProducerProgress } from './producer.js';
import type { WorkspaceQueue } from './workspace-queue.js';

export interface RetryRunOptions {
  runId: string;
  queue: WorkspaceQueue;
  store: RunStore;
  /** Retry only these rows (default: every failed and invalid row). */
  rows?: number[];
  /** A corrected export (`runs export --failed`, edited): its values replace the stored ones. */
  file?: string;
  logger?: Logger;
}

export interface RetrySummary {
  run: RunRecord;
  progress: ProducerProgress;
  /** Rows of a corrected file that were not retried (unknown row, or not failed/invalid). */
  ignored: Array<{ row: number | null; line: number; reason: string }>;
}

const CHUNK = 500;

/**
 * Re-enqueues a run's failed and invalid rows, re-validated with the run's own mapping. Each
 * retry is a new job generation, so it is not deduped against the first attempt's jobs.
 */
export async function retryRun(options: RetryRunOptions): Promise<RetrySummary> {
  const { store, runId } = options;
  const run = await store.requireRun(runId);
  if (run.operation === 'deal.upsert') {
    throw new CrmSyncError('RUN_STATE', `run ${runId} is a reconciled sync; re-run the sync instead of retrying rows`);
  }
  if (run.options.dryRun) throw new CrmSyncError('RUN_STATE', `run ${runId} was a dry run: nothing to retry; import the file for real`);
  const op: Operation = run.operation;
  const mapping = run.options.mapping !== undefined ? parseMapping(run.options.mapping, `mapping of run ${runId}`) : undefined;
  const ignored: RetrySummary['ignored'] = [];
  const rows = options.file
    ? fromCorrectedFile(options.file, run, op, mapping, store, ignored)
    : fromStoredRows(options.rows, run, op, mapping, store);
  const progress = await produceRun(rows, {
    queue: options.queue,
    store,
    runId,
    requeued: true,
    generation: Date.now(),
    ...(run.options.inviteBatchSize ? { inviteBatchSize: run.options.inviteBatchSize } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  return { run: await store.finishProducing(runId), progress, ignored };
}

async function* fromStoredRows(
  only: number[] | undefined,
  run: RunRecord,
  op: Operation,
  mapping: Mapping | undefined,
  store: RunStore,
): AsyncIterable<IngestedRow> {
  const requeued = await store.requeueRows(run.id, only);
  for (const r of requeued) yield toIngested(op, mapping, r.row, r.line ?? 0, r.original);
}

async function* fromCorrectedFile(
  file: string,
  run: RunRecord,
  op: Operation,
  mapping: Mapping | undefined,
  store: RunStore,
  ignored: RetrySummary['ignored'],
): AsyncIterable<IngestedRow> {
  const reader = openSource(file);
  let chunk: Array<{ row: number; line: number; original: Record<string, string> }> = [];
  const flush = async function* () {
    const byRow = new Map(chunk.map((c) => [c.row, c]));
    const requeued = await store.requeueRows(run.id, [...byRow.keys()]);
    const done = new Set(requeued.map((r) => r.row));
    for (const c of chunk) {
      if (!done.has(c.row)) ignored.push({ row: c.row, line: c.line, reason: 'not a failed or invalid row of this run' });
    }
    for (const r of requeued) {
      const corrected = byRow.get(r.row);
      if (corrected) yield toIngested(op, mapping, r.row, r.line ?? corrected.line, corrected.original);
    }
    chunk = [];
  };
  for await (const item of reader) {
    if (item.kind === 'problem') {
      ignored.push({ row: null, line: item.line, reason: item.message });
      continue;
    }
    const row = Number(item.original.crm_sync_row);
    if (!Number.isInteger(row) || row < 1) {
      ignored.push({ row: null, line: item.line, reason: 'no crm_sync_row column: use a file made by "runs export"' });
      continue;
    }
    if (item.original.crm_sync_run_id && item.original.crm_sync_run_id !== run.id) {
      ignored.push({ row, line: item.line, reason: `belongs to run ${item.original.crm_sync_run_id}` });
      continue;
    }
    const original: Record<string, string> = {};
    for (const [k, v] of Object.entries(item.original)) {
      if (!(EXPORT_META_COLUMNS as readonly string[]).includes(k)) original[k] = unescapeCsvCell(v);
    }
    chunk.push({ row, line: item.line, original });
    if (chunk.length >= CHUNK) yield* flush();
  }
  if (chunk.length) yield* flush();
}

function toIngested(op: Operation, mapping: Mapping | undefined, row: number, line: number, original: Record<string, string>): IngestedRow {
  const { payload, errors } = ingestValues(op, original, mapping);
  return payload ? { row, line, original, payload } : { row, line, original, code: 'ROW_INVALID', errors: errors ?? [] };
}
