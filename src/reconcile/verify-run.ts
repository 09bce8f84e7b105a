import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { stringify } from 'csv-stringify/sync';
import { operationEntry, sendsAs, type CrmClient, type ListResource, type Operation } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import { openSource, parseMapping, RowDecoder, type Mapping } from '../ingest/index.js';
import { sourceIdentity } from '../lifecycle/index.js';
import { type RequestBudget } from '../rate/index.js';
import { RunKeys } from '../keys/index.js';
import {
  RowFence,
  earliestStamp,
  escapeCsvCell,
  type RecordClock,
  type RunRecord,
  type RunStore,
} from '../runs/index.js';
import { canonicalFromRow, diffFields, normaliseName, showCanonical, type IndexedRecord } from './compare.js';
import { checkDigest, digestHolds } from './sent-digest.js';
import { RecordIndex } from './record-index.js';
import { countOf, tally } from '../counts/index.js';

export interface VerifyRunOptions {
  runId: string;
  store: RunStore;
  /** Client of the run's workspace. */
  client: CrmClient;
  /** Drift CSV (row,line,record_id,field,sent,current), one line per differing field. Default: none. */
  out?: NodeJS.WritableStream;
  /** The workspace's shared request budget: every list page takes a token. Default: pages are not budgeted. */
  budget?: RequestBudget;
  /** Records per list page. Default 100. */
  pageSize?: number;
}

export interface VerifyResult {
  runId: string;
  /** Succeeded rows compared with the CRM. */
  checked: number;
  matching: number;
  /** Rows whose record differs from what was sent. */
  drifted: number;
  /** Rows whose record is no longer in the CRM's list. */
  missing: number;
  /** Drifted rows per field. */
  byField: Record<string, number>;
  /** Succeeded rows whose record id another row of the run also recorded. */
  sharedIds: number;
  /**
   * In a deal.create or deal.upsert run: this run's suspected duplicates — deals made while the
   * run ran, equal to a row's sent fields, that no row of any run recorded. Two identical rows
   * with a deal each are not counted. Exit 1.
   */
  suspectedDuplicates: number;
  /** Deals like a row's that were made before the run began (a person's, an earlier import's): not this run's doing. */
  preexistingLookAlikes: number;
  /** Deals like a row's that a row of another run recorded (the same file run twice): that run's own. */
  otherRunsDeals: number;
  /** Deals like a row's made after the run ended (a person's, a later import's): not this run's doing. */
  madeAfterRun: number;
  /**
   * Deals an `uncertain` row of this run names that are in the CRM and recorded by no row (maybe
   * its own; `runs retry` looks again): not duplicates, whatever content the succeeded rows have.
   */
  inDoubtDeals: number;
  /** Succeeded rows whose deal was made before the run began: a deal that cannot be the row's own. Exit 1. */
  recordedBeforeSend: number;
  listPages: number;
  /** How the source changed since the run, when it did: its values were not read (digests only). */
  sourceChanged?: string;
}

export const VERIFY_CSV_COLUMNS = ['row', 'line', 'record_id', 'field', 'sent', 'current'] as const;

/** The list a run's records are in and the operation its rows decode as (the operation table's); none for invites. */
function kindOf(
  op: RunRecord['operation'],
): { resource: ListResource; mapOp: Exclude<Operation, 'team.invite'> } | undefined {
  const { resource } = operationEntry(op);
  return resource === 'team-members'
    ? undefined
    : { resource, mapOp: sendsAs(op) as Exclude<Operation, 'team.invite'> };
}

/** A succeeded row as verify needs it. */
interface SentRow {
  row: number;
  line: number | undefined;
  /** The source row's key (a database run's key column). */
  ref: string | undefined;
  recordId: string;
  /** Digest of what it sent (src/reconcile/sent-digest.ts); absent for runs of older versions. */
  sent: string | undefined;
}

/**
 * After a run: pages the CRM again and compares every succeeded row's record with what the row
 * sent (docs/architecture.md, "Verify"). What was sent is the digest stored with the row's
 * result, so a row corrected by `runs retry --file` is checked against the correction, and the
 * source is not needed. The source file is read only to show the sent values of drifted fields,
 * when it is unchanged and says what the digest says; runs recorded before digests existed are
 * compared with the file, which must then be unchanged. `position` is never compared: the API
 * does not report it.
 */
export async function verifyRun(options: VerifyRunOptions): Promise<VerifyResult> {
  const { store, runId, budget } = options;
  const run = await store.requireRun(runId);
  const kind = kindOf(run.operation);
  if (!kind)
    throw new CrmSyncError('USAGE', `run ${runId} is a ${run.operation} run: only record writes can be verified`);

  const rows = new Map<number, SentRow>();
  // Words of the uncertain rows' messages, which name the deals each may have made.
  const doubtWords = new Set<string>();
  let undigested = 0;
  for await (const result of store.iterateResults(runId)) {
    if (result.status === 'uncertain') for (const w of result.message?.split(/[\s(),;:]+/) ?? []) doubtWords.add(w);
    if (result.status !== 'succeeded' || result.recordId === undefined) continue;
    rows.set(result.row, {
      row: result.row,
      line: result.line,
      ref: result.ref,
      recordId: result.recordId,
      sent: result.sent,
    });
    if (result.sent === undefined) undigested++;
  }
  const query = run.options.query;
  if (query !== undefined && undigested > 0) {
    // Never the case for runs of this version: every succeeded row keeps its digest.
    throw new CrmSyncError(
      'RUN_STATE',
      `run ${runId} read a database query and ${undigested} of its rows were recorded without a digest of what they sent; ` +
        'verify does not run the query again (the database has moved on since), so it cannot check this run',
    );
  }
  const changed = query ? undefined : sourceChange(run.source, run.options.sourceSize, run.options.sourceMtimeMs);
  if (changed !== undefined && undigested > 0) {
    // Those rows can only be compared with what the file said: a changed file would report its changes as drift.
    throw new CrmSyncError(
      'RUN_STATE',
      `${run.source} changed since run ${runId} began (${changed}): ${undigested} of its rows were recorded without a digest of what they sent, ` +
        'so verify would compare the CRM with what the file says now; it cannot check this run',
    );
  }
  const mapping: Mapping | undefined =
    run.options.mapping !== undefined ? parseMapping(run.options.mapping, `mapping of run ${runId}`) : undefined;
  // Only the rows the run sent are compared, so other columns are no reason to stop here.
  const decoder = new RowDecoder({ op: kind.mapOp, ...(mapping ? { mapping } : {}), ignoreUnknownColumns: true });

  const createsDeals = operationEntry(run.operation).creates;
  const index = await RecordIndex.build(options.client, {
    resource: kind.resource,
    keepCreatedAt: createsDeals,
    ...(options.pageSize ? { pageSize: options.pageSize } : {}),
    ...(budget ? { beforeFetch: () => budget.take() } : {}),
  });
  const outcome: VerifyResult = {
    runId,
    checked: 0,
    matching: 0,
    drifted: 0,
    missing: 0,
    byField: {},
    sharedIds: 0,
    suspectedDuplicates: 0,
    preexistingLookAlikes: 0,
    otherRunsDeals: 0,
    madeAfterRun: 0,
    inDoubtDeals: 0,
    recordedBeforeSend: 0,
    listPages: index.pages,
    ...(changed !== undefined ? { sourceChanged: changed } : {}),
  };
  const rowsById = new Map<string, number>();
  for (const r of rows.values()) tally(rowsById, r.recordId);
  // Deals like one a row recorded that no row of this run recorded: sorted into this run's
  // suspected duplicates, deals made before it, and other runs' deals (RunWindow).
  const dealsByContent = createsDeals ? groupByContent(index.all()) : new Map<string, IndexedRecord[]>();
  const recordedByContent = new Map<string, Set<string>>();
  for (const r of createsDeals ? rows.values() : []) {
    const record = index.byId(r.recordId);
    if (!record) continue;
    const ids = recordedByContent.get(contentKey(record)) ?? new Set<string>();
    recordedByContent.set(contentKey(record), ids.add(record.id));
  }
  // Every deal an uncertain row names, whether or not a succeeded row has the same content (the
  // look-alikes below are only sought beside succeeded rows, and an uncertain row's candidates
  // equal its own sent fields, which no succeeded row may share).
  const inDoubt = createsDeals ? await namedInDoubt(store, run, doubtWords, index, rowsById) : new Set<string>();
  outcome.inDoubtDeals = inDoubt.size;
  const window = createsDeals ? await RunWindow.of(store, run, inDoubt) : undefined;
  // A database run's rows are named by their key, next to the line (its row number).
  const keyed = query?.keyColumn !== undefined;
  const write = async (cells: Array<string | number | undefined>, ref?: string) => {
    const shown = keyed ? [...cells.slice(0, 2), ref, ...cells.slice(2)] : cells;
    const line = stringify([shown.map((c) => escapeCsvCell(c === undefined ? '' : String(c)))]);
    if (options.out && !options.out.write(line)) await once(options.out, 'drain');
  };
  await write([...VERIFY_CSV_COLUMNS], 'key');

  const check = async (r: SentRow, fields: Record<string, unknown> | undefined): Promise<void> => {
    outcome.checked++;
    const record = index.byId(r.recordId);
    if (!record) {
      outcome.missing++;
      await write([r.row, r.line, r.recordId, '(record)', 'exists', 'missing'], r.ref);
      return;
    }
    const sharing = countOf(rowsById.get(r.recordId));
    if (sharing > 1) {
      outcome.sharedIds++;
      await write([r.row, r.line, r.recordId, '(shared id)', 'one row per record', `${sharing} rows`], r.ref);
    }
    const key = createsDeals ? contentKey(record) : undefined;
    const recorded = key === undefined ? undefined : recordedByContent.get(key);
    // Like the row in every field it sent (its digest, where one was kept); the name as the CRM
    // normalises it, which the content key already compared.
    const alike = (d: IndexedRecord) =>
      r.sent === undefined || checkDigest(kind.resource, r.sent, d)?.drifted.every((f) => f === 'name') === true;
    const strays =
      key && recorded ? (dealsByContent.get(key) ?? []).filter((d) => !recorded.has(d.id) && alike(d)) : [];
    if (window && key && strays.length > 0) {
      // Reported once per content, on the first of its rows.
      recordedByContent.delete(key);
      const sorted = await window.sort(
        strays.map((d) => d.id),
        index,
      );
      outcome.preexistingLookAlikes += sorted.before.length;
      outcome.otherRunsDeals += sorted.otherRuns.length;
      outcome.madeAfterRun += sorted.after.length;
      // sorted.inDoubt is already counted (namedInDoubt): it is only kept out of the other kinds.
      outcome.suspectedDuplicates += sorted.duplicates.length;
      if (sorted.duplicates.length > 0)
        await write(
          [r.row, r.line, r.recordId, '(duplicate)', 'no other deal like it', sorted.duplicates.join(';')],
          r.ref,
        );
    }
    if (window?.surelyBefore(index.createdAt(r.recordId))) {
      outcome.recordedBeforeSend++;
      await write([r.row, r.line, r.recordId, '(created)', 'after the row was sent', 'before the run began'], r.ref);
    }
    const changes = r.sent !== undefined ? digestChanges(kind.resource, r.sent, record, fields) : undefined;
    const drift = changes ?? (fields ? diffFields(kind.resource, fields, record, ['id', 'position']) : []);
    if (drift.length === 0) {
      outcome.matching++;
      return;
    }
    outcome.drifted++;
    for (const c of drift) {
      tally(outcome.byField, c.field);
      await write([r.row, r.line, r.recordId, c.field, showCanonical(c.wanted), showCanonical(c.current)], r.ref);
    }
  };

  // A database run's query is not run again: its rows are checked against their digests alone.
  if (query === undefined && changed === undefined && existsSync(run.source)) {
    // The file in row order: it shows the sent values of drifted fields (and is all older runs have).
    const reader = openSource(run.source, {
      ...(run.options.format ? { format: run.options.format } : {}),
      ...(run.options.delimiter ? { delimiter: run.options.delimiter } : {}),
    });
    for await (const item of reader) {
      const r = rows.get(item.row);
      if (item.kind !== 'record' || r === undefined) continue;
      rows.delete(item.row);
      await check(r, decoder.mapValues(item.values).fields);
    }
  }
  // Rows the file did not give (it is gone or changed, or the rows came from elsewhere): their digests.
  for (const r of rows.values()) await check(r, undefined);
  return outcome;
}

/** Drifted fields by the digest; sent values come from the source when it says what was sent. */
function digestChanges(
  resource: ListResource,
  digest: string,
  record: IndexedRecord,
  fields: Record<string, unknown> | undefined,
): Array<{ field: string; wanted: string; current: string | undefined }> | undefined {
  const result = checkDigest(resource, digest, record);
  if (!result) return undefined;
  return result.drifted.map((field) => {
    const fromSource = fields?.[field] === undefined ? undefined : canonicalFromRow(field, fields[field]);
    const wanted =
      fromSource !== undefined && digestHolds(resource, digest, field, fromSource)
        ? fromSource
        : '(sent value not kept)';
    return { field, wanted, current: record.values[field] };
  });
}

/** How the source changed since the run began, or undefined when it did not (or nothing was recorded). */
function sourceChange(source: string, size: number | undefined, mtime: number | undefined): string | undefined {
  if (size === undefined) return undefined;
  const now = sourceIdentity(source);
  if (now.sourceSize === size && now.sourceMtimeMs === mtime) return undefined;
  const when = (ms: number | undefined) => (ms !== undefined ? new Date(ms).toISOString() : 'gone');
  return `size ${size} → ${now.sourceSize ?? 'gone'} bytes, modified ${when(mtime)} → ${when(now.sourceMtimeMs)}`;
}

/**
 * When the run ran, on the CRM's record clock (calibrated from answered creates, RecordClock),
 * and which row of which run recorded a deal (the workspace's claims).
 */
class RunWindow {
  private constructor(
    private readonly store: RunStore,
    private readonly run: RunRecord,
    /** Record-clock bounds: a deal stamped before `from` was surely made before the run began. */
    private readonly from: number,
    /**
     * ...and one stamped after `until` was made after it ended, later than any of its requests
     * can have landed (the write lease after its end; Infinity while it runs).
     */
    private readonly until: number,
    /** Deals the run's uncertain rows name (namedInDoubt): each may be its row's own. */
    private readonly inDoubt: ReadonlySet<string>,
  ) {}

  static async of(store: RunStore, run: RunRecord, inDoubt: ReadonlySet<string>): Promise<RunWindow> {
    const fence = new RowFence({ redis: store.redis, prefix: store.prefix, workspace: run.workspace });
    const clock: RecordClock | undefined = await fence.recordClock().catch(() => undefined);
    const began = Date.parse(run.createdAt);
    const ended = run.finishedAt !== undefined ? Date.parse(run.finishedAt) : Infinity;
    // Without a calibration, the CRM's clock may be off ours by anything up to a few minutes.
    const from = clock ? earliestStamp(began, clock, true) : began - UNCALIBRATED_MARGIN_MS;
    // A request delivered late lands after the run ended (the gap no client closes): a deal up to
    // a write lease after the end may still be the run's duplicate.
    const late = ended + fence.leaseMs;
    const until = clock ? late + clock.hi + clock.resolutionMs : late + UNCALIBRATED_MARGIN_MS;
    return new RunWindow(store, run, from, until, inDoubt);
  }

  surelyBefore(createdAt: number | undefined): boolean {
    return createdAt !== undefined && createdAt < this.from;
  }

  /** Unrecorded look-alikes: made before the run, recorded by another run's row, or this run's duplicates. */
  async sort(
    ids: string[],
    index: RecordIndex,
  ): Promise<{ before: string[]; after: string[]; otherRuns: string[]; inDoubt: string[]; duplicates: string[] }> {
    const keys = new RunKeys(this.store.prefix);
    const owners = await this.store.redis.mget(...ids.map((id) => keys.dealClaim(this.run.workspace, id)));
    const out: Record<'before' | 'after' | 'otherRuns' | 'inDoubt' | 'duplicates', string[]> = {
      before: [],
      after: [],
      otherRuns: [],
      inDoubt: [],
      duplicates: [],
    };
    ids.forEach((id, i) => {
      const owner = owners[i];
      const createdAt = index.createdAt(id);
      if (owner && !owner.startsWith(`${this.run.id}/`)) out.otherRuns.push(id);
      // What its uncertain row says of it comes first: it may be that row's own.
      else if (this.inDoubt.has(id)) out.inDoubt.push(id);
      else if (this.surelyBefore(createdAt)) out.before.push(id);
      else if (createdAt !== undefined && createdAt > this.until) out.after.push(id);
      else out.duplicates.push(id);
    });
    return out;
  }
}

/**
 * The deals the run's uncertain rows name (words of their messages) that are in the CRM and that
 * no row of any run recorded: each may be its row's own (`runs retry` looks for it again). A
 * named deal a row recorded since is that row's, not in doubt.
 */
async function namedInDoubt(
  store: RunStore,
  run: RunRecord,
  doubtWords: ReadonlySet<string>,
  index: RecordIndex,
  recordedByRun: ReadonlyMap<string, unknown>,
): Promise<Set<string>> {
  const named = [...doubtWords].filter((w) => index.byId(w) !== undefined && !recordedByRun.has(w));
  if (named.length === 0) return new Set();
  const keys = new RunKeys(store.prefix);
  const owners = await store.redis.mget(...named.map((id) => keys.dealClaim(run.workspace, id)));
  return new Set(named.filter((_, i) => owners[i] === null));
}

/** How far the CRM's record clock may be from ours when no answered create calibrated it. */
const UNCALIBRATED_MARGIN_MS = 300_000;

/** What identical creates share in the CRM: the normalised name and the value. */
function contentKey(record: IndexedRecord): string {
  return `${normaliseName(record.name)}\u0000${record.values.value ?? ''}`;
}

function groupByContent(records: Iterable<IndexedRecord>): Map<string, IndexedRecord[]> {
  const groups = new Map<string, IndexedRecord[]>();
  for (const record of records) {
    const key = contentKey(record);
    const held = groups.get(key);
    if (held) held.push(record);
    else groups.set(key, [record]);
  }
  return groups;
}
