import {
  isUpdatePayload,
  OPERATION_RESOURCE,
  isRunOnly,
  rowsPerJobOf,
  runShape,
  UPDATE_REQUIRED_FIELDS,
  type Operation,
} from '../crm/index.js';
import { DEFAULTS, derivedSettings, resolveSettings } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import {
  openSource,
  parseMapping,
  recordedKeyColumn,
  RowDecoder,
  type IngestedRow,
  type LoadReferences,
} from '../ingest/index.js';
import {
  isExportMetaColumn,
  resendPlace,
  runOfSeq,
  RowFence,
  unescapeCsvCell,
  writtenLater,
  wouldBeSuperseded,
  type RequeuedRow,
  type RowResult,
  type RunRecord,
  type RunStore,
} from '../runs/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import { jobsForRows, produceRun, waitForRoom, type ProducedRow, type ProducerProgress } from './producer.js';
import { checkRetryApproval } from './approval-rule.js';
import { runLife } from './run-life.js';
import type { WorkspaceQueue } from '../queue/index.js';

export interface RetryRunOptions {
  runId: string;
  /** Where the run mapping's names resolve from (read again: a name may resolve now). Default: such a run is refused. */
  loadReferences?: LoadReferences;
  queue: WorkspaceQueue;
  store: RunStore;
  /** Retry only these rows (default: every failed and invalid row). */
  rows?: number[];
  /** A corrected export (`runs export --failed`, edited): its values replace the stored ones. */
  file?: string;
  logger?: Logger;
  /** Rows are detached from the store only while the queue is below this. Default DEFAULTS.producer (10,000). */
  highWaterMark?: number;
  /** How many ignored lines of a corrected file are kept with their reason. Default DEFAULTS.producer (200). */
  ignoredSampleSize?: number;
  /**
   * Rows whose every field a later run already wrote: false (default) records them
   * `superseded` and sends nothing (sending would put older values back); true sends them as
   * new writes that become the records' latest (every row of the retry then orders after
   * every write made before it).
   */
  resendSuperseded?: boolean;
  /** The config's retention: what a create marker put back lives (createMarkerTtlMs). Default DEFAULTS.retention (30 days). */
  retentionMs?: number;
  /**
   * The run's workspace's `requireApproval`: a retry from a corrected file is refused there
   * (checkRetryApproval, APPROVAL_REQUIRED). Every caller that retries for a person passes it
   * (CLI, dashboard). Default false.
   */
  requireApproval?: boolean;
}

export interface RetrySummary {
  run: RunRecord;
  progress: ProducerProgress;
  /**
   * Lines of a corrected file that were not retried (unknown row, not failed/invalid, not
   * readable): the first `ignoredSampleSize` of them, so memory stays bounded for any file.
   */
  ignored: IgnoredLine[];
  /** How many lines were ignored in all (≥ ignored.length). */
  ignoredCount: number;
  /**
   * Rows a later run had already written (every field they would change): recorded
   * `superseded` and not sent, or with `resendSuperseded` sent as new writes (`resent`).
   */
  writtenLater: { skipped: number; resent: number };
}

export interface IgnoredLine {
  row: number | null;
  line: number;
  reason: string;
}

const CHUNK = 500;
/** A restored marker's send bound is the run's creation, less this for clocks that disagree. */
const CLOCK_MARGIN_MS = 60_000;
export const DEFAULT_IGNORED_SAMPLE = DEFAULTS.producer.ignoredSample;

/** Counts every ignored line, keeps the first `limit` with their reasons. */
class IgnoredLines {
  readonly sample: IgnoredLine[] = [];
  count = 0;

  constructor(private readonly limit: number) {}

  add(line: IgnoredLine): void {
    this.count++;
    if (this.sample.length < this.limit) this.sample.push(line);
  }
}

/**
 * Re-enqueues a run's failed and invalid rows, re-validated with the run's own mapping. Each
 * retry is a new job generation, so it is not deduped against the first attempt's jobs.
 *
 * Rows are taken from the store a chunk at a time, and only once the queue has room, so at
 * any moment at most one chunk is detached from the store and not yet in the queue (a crash
 * then can cost at most those). The run is not complete until the last chunk is queued.
 */
export async function retryRun(given: RetryRunOptions): Promise<RetrySummary> {
  const options = resolveSettings(given, {
    highWaterMark: DEFAULTS.producer.highWaterMark,
    ignoredSampleSize: DEFAULTS.producer.ignoredSample,
    retentionMs: derivedSettings().retentionMs,
  });
  const { store, runId } = options;
  const run = await store.requireRun(runId);
  // Before anything of the run is touched: an edited file's values were never approved.
  checkRetryApproval({
    runId,
    workspace: run.workspace,
    requireApproval: options.requireApproval === true,
    op: run.operation,
    file: options.file !== undefined,
  });
  if (isRunOnly(run.operation)) {
    throw new CrmSyncError('RUN_STATE', `run ${runId} is a reconciled sync; re-run the sync instead of retrying rows`);
  }
  if (run.options.dryRun)
    throw new CrmSyncError('RUN_STATE', `run ${runId} was a dry run: nothing to retry; import the file for real`);
  if (run.status === 'blocked')
    throw new CrmSyncError(
      'RUN_STATE',
      `run ${runId} is blocked (API key refused); resume it first: crm-sync runs resume ${runId}`,
    );
  const op: Operation = run.operation;
  if (await options.queue.isPaused()) {
    // Rows would wait in a paused queue, and a caller (a dashboard request) with them.
    throw new CrmSyncError(
      'RUN_STATE',
      `the queue of workspace ${run.workspace} is paused: resume the workspace before retrying rows`,
    );
  }
  const mapping =
    run.options.mapping !== undefined ? parseMapping(run.options.mapping, `mapping of run ${runId}`) : undefined;
  const keyColumn = recordedKeyColumn(run);
  // The run's own decoder: rows are re-validated exactly as the run's first pass did.
  const decoder = new RowDecoder({
    op,
    ...(mapping ? { mapping } : {}),
    ...(run.options.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
    // A database run's key column is kept with each row's values, and is no field.
    ...(keyColumn !== undefined ? { extraColumns: [keyColumn] } : {}),
  });
  const lists = decoder.referenceLists();
  if (lists.length > 0) {
    if (options.loadReferences === undefined)
      throw new CrmSyncError('USAGE', `run ${runId}'s mapping names references by name; this retry cannot read them`);
    // Every retried row is resolved before one is sent, with the names as the CRM shows them now.
    decoder.useReferences(await options.loadReferences(lists));
  }
  const ignored = new IgnoredLines(Math.max(0, options.ignoredSampleSize));
  const logger = options.logger ?? silentLogger;
  const highWater = options.highWaterMark;
  // What the run was produced with: recorded only when above the library default.
  const rowsPerJob = run.options.rowsPerJob ?? DEFAULTS.producer.rowsPerJob;
  // The retry's round: part of its job ids (not deduped against earlier jobs) and, in the run
  // store, what fences the rows' earlier jobs off.
  const generation = Date.now();
  // A resend orders after every write made before this moment (a run id is such a place).
  const orderAs = options.resendSuperseded ? resendPlace(await store.serverTime(run.workspace), run.id) : undefined;
  const order = new OrderCheck(run, store, generation, orderAs);
  const perJob = rowsPerJobOf(op, {
    rowsPerJob,
    inviteBatchSize: run.options.inviteBatchSize ?? DEFAULTS.producer.inviteBatchSize,
  });
  const lookFirst = lookFirstIfInDoubt(run, store, logger, options.retentionMs);
  const { run: after, progress } = await runLife({
    store,
    logger,
    // Rows the retry had not reached keep their earlier result: the run is whole either way.
    whenProducingFails: 'finish-run',
    start: async () => {
      await store.beginProducing(runId);
      return run;
    },
    produce: (_run, signal) => {
      // False once the run is stopped (cancelled): no more rows are taken from the store. The
      // status is read here too, so a cancel that emptied the queue is not taken for room.
      const room = async () => {
        await waitForRoom(options.queue, jobsForRows(highWater, perJob), logger, signal);
        return !signal.aborted && (await store.getStatus(runId)) !== 'cancelled';
      };
      const rows = options.file
        ? fromCorrectedFile(options.file, run, decoder, store, ignored, room, generation, lookFirst)
        : fromStoredRows(options.rows, run, decoder, store, room, generation, lookFirst, orderAs !== undefined);
      return produceRun(order.filter(rows), {
        highWaterMark: highWater,
        queue: options.queue,
        store,
        runId,
        requeued: true,
        generation,
        signal,
        ...(run.options.inviteBatchSize ? { inviteBatchSize: run.options.inviteBatchSize } : {}),
        rowsPerJob,
        logger,
      });
    },
  });
  const writtenLater = { skipped: order.skipped, resent: order.resent };
  return { run: after, progress, ignored: ignored.sample, ignoredCount: ignored.count, writtenLater };
}

/**
 * What a retry did with rows a later run had already written, in words, said with its answer
 * (CLI and dashboard): `resendHint` says how to send them anyway.
 */
export function writtenLaterWords(w: RetrySummary['writtenLater'], resendHint: string): string[] {
  const lines: string[] = [];
  if (w.skipped > 0)
    lines.push(
      `${w.skipped} row${w.skipped === 1 ? '' : 's'} not sent again: later runs already wrote every field ` +
        `${w.skipped === 1 ? 'it' : 'they'} would change (superseded; ${resendHint}).`,
    );
  if (w.resent > 0)
    lines.push(
      `${w.resent} row${w.resent === 1 ? '' : 's'} a later run had written ${w.resent === 1 ? 'is' : 'are'} ` +
        'sent as new writes: their values become the latest.',
    );
  return lines;
}

/**
 * Before a retried update row is queued: did a later run already write every field it would
 * change? Then sending it would put older values back, and the retry says so up front —
 * it records the row `superseded` at once (default), or counts it as resent.
 */
class OrderCheck {
  skipped = 0;
  resent = 0;
  readonly #fence: RowFence;
  #results: RowResult[] = [];

  constructor(
    private readonly run: RunRecord,
    private readonly store: RunStore,
    private readonly round: number,
    private readonly orderAs: string | undefined,
  ) {
    this.#fence = new RowFence({ redis: store.redis, prefix: store.prefix, workspace: run.workspace });
  }

  async *filter(rows: AsyncIterable<IngestedRow>): AsyncIterable<ProducedRow> {
    for await (const row of rows) {
      const keep = await this.#keep(row);
      // Only a row a later run wrote in full is resent as a new write: the others keep their
      // run's place, so their fields a later run wrote stay the later run's.
      if (keep === 'resend' && this.orderAs !== undefined) yield { ...row, orderAs: this.orderAs };
      else if (keep) yield row;
      if (this.#results.length >= CHUNK) await this.#flush();
    }
    await this.#flush();
  }

  async #keep(row: IngestedRow): Promise<boolean | 'resend'> {
    const p = row.payload;
    if (!p || !isUpdatePayload(p)) return true;
    const fields = Object.keys(p.fields).filter((f) => (p.fields as Record<string, unknown>)[f] !== undefined);
    const record = { resource: OPERATION_RESOURCE[p.op], id: p.id };
    const later = await this.#fence.laterWrites({ runId: this.run.id, row: row.row }, record, fields);
    if (!wouldBeSuperseded(fields, UPDATE_REQUIRED_FIELDS[p.op], later)) return true;
    if (this.orderAs) {
      this.resent++;
      return 'resend';
    }
    this.skipped++;
    const runs = [...new Set(later.map((l) => runOfSeq(l.by)))].join(', ');
    this.#results.push(
      writtenLater(
        row,
        `not sent again: later rows (run ${runs}) wrote every field this row would change; ` +
          `"runs retry ${this.run.id} --resend-superseded" sends it as a new write over them`,
        row.original,
      ),
    );
    return false;
  }

  async #flush(): Promise<void> {
    if (this.#results.length === 0) return;
    const results = this.#results;
    this.#results = [];
    const fence = { lockKey: '', token: '', round: this.round };
    await this.store.recordFenced(this.run.id, results, { fences: results.map(() => fence) });
  }
}

/**
 * An uncertain create may have made its deal: retried, it looks before it sends, even when its
 * marker is gone (expired, or Redis lost it). A marker put back says only "sent after the run
 * began": its look-up takes no deal as the row's own (any deal like it leaves it uncertain) and
 * sends only once it found none.
 */
function lookFirstIfInDoubt(
  run: RunRecord,
  store: RunStore,
  logger: Logger,
  retentionMs: number,
): (rows: RequeuedRow[]) => Promise<void> {
  if (runShape(run.operation) !== 'create') return async () => undefined;
  const fence = new RowFence({
    redis: store.redis,
    prefix: store.prefix,
    workspace: run.workspace,
    retentionMs,
  });
  return async (rows) => {
    const doubt = rows.filter((r) => r.previous === 'uncertain').map((r) => r.row);
    if (doubt.length === 0) return;
    const restored = await fence.restoreMarkers(run.id, doubt, Date.parse(run.createdAt) - CLOCK_MARGIN_MS);
    if (restored > 0)
      logger.warn(
        { runId: run.id, rows: restored },
        'uncertain creates whose marker was gone look for their deal before sending: any deal like them leaves them uncertain',
      );
  };
}

async function* fromStoredRows(
  only: number[] | undefined,
  run: RunRecord,
  decoder: RowDecoder,
  store: RunStore,
  room: () => Promise<boolean>,
  round: number,
  lookFirst: (rows: RequeuedRow[]) => Promise<void>,
  resend: boolean,
): AsyncIterable<IngestedRow> {
  const requeueChunk = async (rows: number[]) => {
    if (!(await room())) return [];
    const requeued = await store.requeueRows(run.id, rows, round, resend);
    await lookFirst(requeued);
    return requeued;
  };
  async function* requeueListed(rows: number[]): AsyncIterable<IngestedRow> {
    for (let i = 0; i < rows.length; i += CHUNK)
      for (const r of await requeueChunk(rows.slice(i, i + CHUNK))) yield storedToIngested(decoder, r);
  }
  if (only) {
    yield* requeueListed(only);
    return;
  }
  // Walk the problems by row number: rows still invalid after re-validation go back into the
  // index behind the cursor, so each row is retried once per call.
  let chunk: number[] = [];
  for await (const problem of store.iterateResults(run.id, { problemsOnly: true, batchSize: CHUNK })) {
    chunk.push(problem.row);
    if (chunk.length < CHUNK) continue;
    for (const r of await requeueChunk(chunk)) yield storedToIngested(decoder, r);
    chunk = [];
  }
  for (const r of await requeueChunk(chunk)) yield storedToIngested(decoder, r);
  if (!resend) return;
  // A resend also takes the rows an earlier retry did not send because a later run had
  // written them (they are not problems, so the walk above does not see them).
  const later: number[] = [];
  for await (const r of store.iterateResults(run.id, { batchSize: CHUNK }))
    if (r.status === 'superseded' && r.code === 'ROW_WRITTEN_LATER') later.push(r.row);
  yield* requeueListed(later);
}

async function* fromCorrectedFile(
  file: string,
  run: RunRecord,
  decoder: RowDecoder,
  store: RunStore,
  ignored: IgnoredLines,
  room: () => Promise<boolean>,
  round: number,
  lookFirst: (rows: RequeuedRow[]) => Promise<void>,
): AsyncIterable<IngestedRow> {
  const reader = openSource(file);
  let chunk: Array<{ row: number; line: number; original: Record<string, string> }> = [];
  const flush = async function* () {
    const byRow = new Map(chunk.map((c) => [c.row, c]));
    if (!(await room())) {
      for (const c of chunk) ignored.add({ row: c.row, line: c.line, reason: 'not retried: the run was cancelled' });
      chunk = [];
      return;
    }
    const requeued = await store.requeueRows(run.id, [...byRow.keys()], round);
    await lookFirst(requeued);
    const done = new Set(requeued.map((r) => r.row));
    for (const c of chunk) {
      if (!done.has(c.row))
        ignored.add({ row: c.row, line: c.line, reason: 'not a failed, invalid or uncertain row of this run' });
    }
    for (const r of requeued) {
      const corrected = byRow.get(r.row);
      if (corrected) yield toIngested(decoder, r, r.line ?? corrected.line, corrected.original);
    }
    chunk = [];
  };
  for await (const item of reader) {
    if (item.kind === 'problem') {
      ignored.add({ row: null, line: item.line, reason: item.message });
      continue;
    }
    const cell = item.original.crm_sync_row;
    const row = Number(cell);
    if (cell === undefined || cell.trim() === '' || !Number.isInteger(row) || row < 1) {
      // Said as it is: a file without the column, or a line whose row number was changed.
      const reason =
        cell === undefined
          ? 'no crm_sync_row column: use a file made by "runs export"'
          : cell.trim() === ''
            ? 'its crm_sync_row cell is empty: keep the row numbers "runs export" wrote'
            : `its crm_sync_row ${JSON.stringify(cell.length > 20 ? `${cell.slice(0, 20)}…` : cell)} is not a row number (a whole number from 1): keep the row numbers "runs export" wrote`;
      ignored.add({ row: null, line: item.line, reason });
      continue;
    }
    if (item.original.crm_sync_run_id && item.original.crm_sync_run_id !== run.id) {
      ignored.add({ row, line: item.line, reason: `belongs to run ${item.original.crm_sync_run_id}` });
      continue;
    }
    // The export escapes header cells like value cells (a column may be named `@total`), so
    // both come back through the same inverse.
    const original: Record<string, string> = {};
    for (const [k, v] of Object.entries(item.original)) {
      if (!isExportMetaColumn(k)) original[unescapeCsvCell(k)] = unescapeCsvCell(v);
    }
    chunk.push({ row, line: item.line, original });
    if (chunk.length >= CHUNK) yield* flush();
  }
  if (chunk.length) yield* flush();
}

/** A stored row decoded again from the values kept with its result. */
function storedToIngested(
  decoder: RowDecoder,
  r: { row: number; ref?: string; line?: number | undefined; original: Record<string, string> },
): IngestedRow {
  // Not a setting: line 0 stands for "line unknown" (RowPlace.line is omitted when unknown).
  return toIngested(decoder, r, r.line ?? 0, r.original);
}

/**
 * A stored row decoded again from the values kept with its result (or a corrected file's): a
 * database run's rows too, so a retry never runs the query again. Its key goes with it.
 */
function toIngested(
  decoder: RowDecoder,
  r: { row: number; ref?: string },
  line: number,
  original: Record<string, string>,
): IngestedRow {
  const ref = r.ref !== undefined ? { ref: r.ref } : {};
  return decoder.decode({ kind: 'record', row: r.row, line, ...ref, values: original, original });
}
