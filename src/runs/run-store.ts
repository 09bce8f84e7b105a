/*
 * Run store: run records and one final result per input row, in Redis. Its keys, and every
 * other key crm-sync writes, are listed in src/keys/key-layout.ts.
 *
 * Counts, the problems index, the status index and completion change together inside Lua
 * scripts (run-scripts.ts), so at-least-once delivery (the same row recorded twice) never
 * counts a row twice and no reader sees a half-applied batch. The `rounds`, `creating`, `ws:`
 * keys are the write fence's (row-fence.ts, fence-scripts.ts; docs/architecture.md).
 */
import type { RedisClient, Script, ScriptArg } from '../redis/index.js';
import { CrmSyncError } from '../errors/index.js';
import { decodeRun, encodeRun, type DecodedRun } from './run-codec.js';
import { historyMarksKey, RUN_STATUSES, RunKeys, type RunRef, type RunStatusKeys } from '../keys/index.js';
import { newRunId } from './run-id.js';
import { DEFAULT_PAGE, nonNegative, RunListing } from './run-listing.js';
import { RunRefs } from './run-refs.js';
import { addRunNames, readRunNames, type RunNames, type SentName } from './run-names.js';
import {
  ADD_QUEUED,
  BEGIN_PRODUCING,
  BLOCK_RUN,
  CANCEL_RUN,
  FAIL_IF_PRODUCER_GONE,
  FINISH_PRODUCING,
  LIFT_HOLD,
  RECORD_RESULTS,
  REQUEUE_ROWS,
  RESUME_RUN,
  SERVER_TIME,
  SET_PRODUCER,
  SET_STATUS,
  SOURCE_READ,
  TOUCH_PRODUCER,
  LINK_UNDO,
  type RefusalReason,
} from './run-scripts.js';
import { decodeResult, encodeResult } from './result-codec.js';
import {
  emptyCounts,
  type CreateRunInput,
  type ListRunsQuery,
  type RowResult,
  type RunCounts,
  type RunRecord,
  type RunStatus,
} from './run-types.js';

export interface RunStoreOptions {
  /** Connected ioredis client, owned by the caller (the store never closes it). */
  redis: RedisClient;
  /** Key prefix. Default `crm-sync`. */
  prefix?: string;
}

export interface RecordResultsOptions {
  /** The rows were counted by addQueued (true), or resolved at ingest (false). Default true. */
  fromQueue?: boolean;
  /**
   * Who writes each result (same order as the results): a queued row's writer is refused
   * unless it still holds its job and the row's retry round. Default: no lock or round check
   * (a row that has a result is still never overwritten from the queue).
   */
  fences?: ReadonlyArray<WriterFence | undefined>;
}

/** The writer of a queued row's result, checked atomically with the write. */
export interface WriterFence {
  /** BullMQ's lock key of the writer's job ('' when the job is no longer active, e.g. the sweep). */
  lockKey: string;
  /** The lock token of the writer's job attempt. */
  token: string;
  /** The row's retry round as the writer's job knows it (0 before any `runs retry`). */
  round: number;
  /** The update this result settles in its record's write order (RowFence.settlement). Default: none. */
  settles?: OrderSettlement;
}

/** An update's place in its record's write order, ended with its result (see RowFence). */
export interface OrderSettlement {
  key: string;
  seq: string;
  applied: boolean;
  /** How long the record remembers it (ms). */
  windowMs: number;
}

/** Why a result was not stored (see RECORD_RESULTS), or a row not sent (the write fence). */
export type { RefusalReason };

export interface RecordOutcome {
  counts: RunCounts;
  /** Results not stored, with why: a late or stale writer's outcome, never an overwrite. */
  refused: Array<{ row: number; reason: RefusalReason }>;
}

/** Why a workspace's queue is held, by kind: an operator's pause, a refused API key, a CRM that does not answer. */
export const HOLD_KINDS = ['paused', 'blocked', 'unreachable'] as const;
export type HoldKind = (typeof HOLD_KINDS)[number];

export interface WorkspaceHold {
  reason: string;
  /** ISO time the hold was set. */
  since: string;
}

export interface ProblemsQuery {
  /** Default 0. */
  offset?: number;
  /** Default 50. */
  limit?: number;
  /** Case-insensitive match on the message, code and field errors. Default: no filter. */
  messageContains?: string;
}

export interface IterateResultsOptions {
  /** Only failed and invalid rows. Default false. */
  problemsOnly?: boolean;
  /** Rows read per Redis round trip. Default 1000. */
  batchSize?: number;
}

/** A row taken back from its failed/invalid result so it can be validated and enqueued again. */
export interface RequeuedRow {
  row: number;
  line?: number;
  /** The source row's key (RowResult.ref). */
  ref?: string;
  original: Record<string, string>;
  /** What the row's result was before the retry took it (an `uncertain` create looks before it sends). */
  previous: RowResult['status'];
}

const DEFAULT_PREFIX = 'crm-sync';
const DEFAULT_BATCH = 1000;
/** Rows per Lua call: large enough to amortise round trips, small enough not to stall Redis. */
const SCRIPT_CHUNK = 1000;
/** How long a hold's lift is remembered (noteLift): any request in flight then has long been answered. */
const LIFT_MEMORY_MS = 60 * 60 * 1000;

export class RunStore {
  /** The caller's connection (also what the producer signals new work on, WorkBoard). */
  readonly redis: RedisClient;
  private readonly keys: RunKeys;
  /** Run id → workspace (its keys' hash tag). */
  readonly #refs: RunRefs;
  readonly #listing: RunListing;

  constructor(options: RunStoreOptions) {
    this.redis = options.redis;
    this.keys = new RunKeys(options.prefix ?? DEFAULT_PREFIX);
    this.#refs = new RunRefs(this.redis, this.keys);
    this.#listing = new RunListing(this.redis, this.keys, this.#refs);
  }

  get prefix(): string {
    return this.keys.prefix;
  }

  /**
   * Redis's clock (the workspace's node on a cluster). Run ids are write order across runs
   * (RowFence seqOf), so they are stamped by the one clock every process shares: an importing
   * host whose clock runs ahead must not make its run outrank runs made after it.
   */
  async serverTime(workspace: string): Promise<Date> {
    return new Date(await SERVER_TIME.run(this.redis, { workspaceKey: this.keys.workspace(workspace) }, {}));
  }

  async createRun(input: CreateRunInput): Promise<RunRecord> {
    const now = input.createdAt ?? (await this.serverTime(input.workspace));
    const run: RunRecord = {
      id: newRunId(now),
      workspace: input.workspace,
      operation: input.operation,
      source: input.source,
      status: input.status ?? 'running',
      counts: emptyCounts(),
      columns: input.columns ?? [],
      options: input.options ?? {},
      createdAt: now.toISOString(),
      producerDone: false,
      producerSeenAt: now.toISOString(),
      producedRow: 0,
      activeMs: 0,
      passes: 0,
    };
    if (input.syncName !== undefined) run.syncName = input.syncName;
    const score = now.getTime();
    const ref = { id: run.id, workspace: run.workspace };
    // The fleet-wide indexes first (their keys have no tag, so they cannot share the MULTI): an
    // id listed without a record is left out of listings, and retention still finds it.
    await Promise.all([
      this.redis.hset(this.keys.runWorkspaces(), run.id, run.workspace),
      this.redis.zadd(this.keys.allRuns(), score, run.id),
      this.redis.sadd(this.keys.workspacesWithRuns(), run.workspace),
      run.syncName !== undefined ? this.redis.zadd(this.keys.bySync(run.syncName), score, run.id) : null,
    ]);
    await this.redis
      .multi()
      .hset(this.keys.run(ref), encodeRun(run))
      .zadd(this.keys.byStatus(run.workspace, run.status), score, run.id)
      .zadd(this.keys.byWorkspace(run.workspace), score, run.id)
      .exec();
    this.#refs.remember(ref);
    return run;
  }

  /** Ids of runs created before `cutoffMs` (epoch ms), oldest first, at most `limit`. */
  async runIdsCreatedBefore(cutoffMs: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(
      this.keys.allRuns(),
      '-inf',
      `(${Math.floor(cutoffMs)}`,
      'LIMIT',
      0,
      Math.max(0, Math.floor(limit)),
    );
  }

  async getRun(id: string): Promise<RunRecord | null> {
    return (await this.load(id))?.record ?? null;
  }

  async requireRun(id: string): Promise<RunRecord> {
    return (await this.require(id)).record;
  }

  /** A page of runs, newest first (RunListing: no filter crosses Cluster slots). */
  async listRuns(query: ListRunsQuery = {}): Promise<{ runs: RunRecord[]; total: number }> {
    return this.#listing.list(query);
  }

  /** The run's keys' workspace, or null when there is no such run. */
  private async refOrNull(id: string): Promise<RunRef | null> {
    return this.#refs.one(id);
  }

  private async ref(id: string): Promise<RunRef> {
    const ref = await this.#refs.one(id);
    if (ref === null) throw runNotFound(id);
    return ref;
  }

  /** Names undo run `undoId` on run `id` (RunRecord.undoneBy); false when `id` is not in Redis (archived). */
  async linkUndo(id: string, undoId: string): Promise<boolean> {
    const ref = await this.refOrNull(id);
    if (ref === null) return false;
    return LINK_UNDO.run(this.redis, { runKey: this.keys.run(ref) }, { undoId });
  }

  /** Records the names rows gave for ids they sent (run-names.ts; the first row's text stays). */
  async addNames(id: string, names: readonly SentName[]): Promise<void> {
    if (names.length === 0) return;
    await addRunNames(this.redis, this.keys, await this.ref(id), names);
  }

  /** The names the run's rows gave for the ids they sent, per field (empty for a run gone or naming nothing). */
  async names(id: string): Promise<RunNames> {
    const ref = await this.refOrNull(id);
    return ref === null ? {} : readRunNames(this.redis, this.keys, ref);
  }

  async setColumns(id: string, columns: string[]): Promise<void> {
    const { ref } = await this.require(id);
    await this.redis.hset(this.keys.run(ref), 'columns', JSON.stringify(columns));
  }

  /**
   * Counts rows handed to the queue. `throughRow` (the highest row among them) makes the call
   * idempotent: a repeat after a lost answer counts nothing, and the run remembers how far its
   * producer got (`producedRow`).
   */
  async addQueued(id: string, count: number, throughRow?: number): Promise<'counted' | 'cancelled'> {
    if (!Number.isInteger(count) || count < 0)
      throw new CrmSyncError('USAGE', `addQueued needs a count >= 0, got ${count}`);
    if (count === 0) return 'counted';
    // -1: the run was cancelled; the caller must not queue these rows.
    const added = await this.script(ADD_QUEUED, id, this.#runKeys, { count, throughRow: throughRow ?? '' });
    return added === -1 ? 'cancelled' : 'counted';
  }

  async recordResults(id: string, results: RowResult[], options: RecordResultsOptions = {}): Promise<RunCounts> {
    return (await this.recordFenced(id, results, options)).counts;
  }

  /** recordResults, also saying which results were refused and why. */
  async recordFenced(id: string, results: RowResult[], options: RecordResultsOptions = {}): Promise<RecordOutcome> {
    const fromQueue = options.fromQueue ?? true;
    const args: string[] = [];
    let windowMs = 1;
    results.forEach((result, i) => {
      if (!Number.isInteger(result.row) || result.row < 1) {
        throw new CrmSyncError('USAGE', `a result needs a row number >= 1, got ${result.row}`);
      }
      const fence = options.fences?.[i];
      const s = fence?.settles;
      if (s) windowMs = Math.max(windowMs, s.windowMs);
      args.push(
        String(result.row),
        encodeResult(result),
        fence?.lockKey ?? '',
        fence?.token ?? '',
        fence ? String(fence.round) : '',
        s?.key ?? '',
        s?.seq ?? '',
        s?.applied ? '1' : '0',
      );
    });
    let counts: RunCounts | null = null;
    const refused: RecordOutcome['refused'] = [];
    // Chunked so one huge batch never blocks Redis for long; each chunk is atomic on its own.
    for (let i = 0; i < args.length || counts === null; i += SCRIPT_CHUNK * 8) {
      const head = { fromQueue: fromQueue ? '1' : '0', now: new Date().toISOString(), windowMs };
      const chunk = await this.script(RECORD_RESULTS, id, this.#rowKeys, head, args.slice(i, i + SCRIPT_CHUNK * 8));
      counts = chunk.counts;
      refused.push(...chunk.refused);
    }
    return { counts, refused };
  }

  async finishProducing(id: string): Promise<RunRecord> {
    await this.script(FINISH_PRODUCING, id, this.#runKeys, { now: new Date().toISOString() });
    return this.requireRun(id);
  }

  /** The producer queued or recorded its source's last row (FAIL_IF_PRODUCER_GONE then completes the run). */
  async markSourceRead(id: string, columns: string[]): Promise<void> {
    await this.script(SOURCE_READ, id, this.#runKeys, { columns: JSON.stringify(columns) });
  }

  /** The producer's heartbeat (see RunRecord.producerSeenAt); answers the run's status. */
  async touchProducer(id: string): Promise<RunStatus> {
    return this.script(TOUCH_PRODUCER, id, this.#runKeys, { now: new Date().toISOString() });
  }

  /**
   * Who produces the run (`host/pid/start`), or `exited@<ISO>` once its producer stopped: a
   * resume need not wait out the producer's silence (resume-producer.ts).
   */
  async setProducer(id: string, producer: string): Promise<void> {
    await this.script(SET_PRODUCER, id, this.#runKeys, { producer });
  }

  /** What setProducer last stored, or null (none, or no such run). */
  async producerOf(id: string): Promise<string | null> {
    const ref = await this.refOrNull(id);
    return ref === null ? null : this.redis.hget(this.keys.run(ref), 'producer');
  }

  /** The run's status alone (one HGET), or null when there is no such run. */
  async getStatus(id: string): Promise<RunStatus | null> {
    const ref = await this.refOrNull(id);
    return ref === null ? null : ((await this.redis.hget(this.keys.run(ref), 'status')) as RunStatus | null);
  }

  /**
   * The run's status and reason (one HMGET), or null when its record is gone. Keyed by the ref,
   * not through the run-id index: Redis may have evicted the index while the run hash stayed.
   */
  async statusOf(ref: RunRef): Promise<{ status: RunStatus; reason: string | null } | null> {
    this.#refs.remember(ref);
    const [status, reason] = await this.redis.hmget(this.keys.run(ref), 'status', 'reason');
    return status ? { status: status as RunStatus, reason: reason ?? null } : null;
  }

  /**
   * Fails the run by its key (whose workspace the caller knows) with the reason: for a run
   * whose entries in the indexes (its id → workspace, its status list) may have been evicted,
   * so store.listRuns would not find it. False when its record itself is gone.
   */
  async failByRef(ref: RunRef, reason: string): Promise<boolean> {
    this.#refs.remember(ref);
    try {
      await this.setStatus(ref.id, 'failed', reason);
      return true;
    } catch (err) {
      if (err instanceof CrmSyncError && err.code === 'RUN_NOT_FOUND') return false;
      throw err;
    }
  }

  /** running/blocked → cancelled with the reason; false for a run that had already ended. */
  async cancelRun(id: string, reason: string): Promise<boolean> {
    return this.script(CANCEL_RUN, id, this.#runKeys, { now: new Date().toISOString(), reason });
  }

  /**
   * Fails the workspace's runs whose producer stopped mid-file (its process was killed): they
   * would otherwise stay running forever. A run whose producer had read its source to the end
   * is finished instead (completed once its rows are). Returns the ids failed.
   */
  async failSilentProducers(workspace: string, silentForMs: number): Promise<string[]> {
    const now = Date.now();
    const oldest = new Date(now - silentForMs).toISOString();
    const failed: string[] = [];
    for (const status of ['running', 'blocked'] as const) {
      const { runs } = await this.listRuns({ workspace, status, limit: 1000 });
      for (const run of runs) {
        if (run.producerDone) continue;
        const reason =
          `the process reading ${run.source} stopped after ${run.counts.total} rows (no sign of life since ${run.producerSeenAt ?? run.createdAt}); ` +
          `rows not read were not sent: go on from there with: crm-sync runs resume ${run.id}`;
        const args = { now: new Date(now).toISOString(), seenBefore: oldest, reason };
        if ((await this.script(FAIL_IF_PRODUCER_GONE, run.id, this.#runKeys, args)) === 1) failed.push(run.id);
      }
    }
    return failed;
  }

  /** A retry produces again: the run stays running (not completed) until finishProducing. */
  async beginProducing(id: string): Promise<void> {
    // The ended pass's duration, for the run's active time (a statistic: read outside the script).
    const run = await this.requireRun(id);
    const took = run.finishedAt ? Date.parse(run.finishedAt) - Date.parse(run.passStartedAt ?? run.createdAt) : NaN;
    await this.script(BEGIN_PRODUCING, id, this.#runKeys, {
      now: new Date().toISOString(),
      lastPassMs: Number.isFinite(took) && took >= 0 ? Math.round(took) : '',
    });
  }

  /** running → blocked with the reason; a run in any other status is left alone. */
  async blockRun(id: string, reason: string): Promise<boolean> {
    return this.script(BLOCK_RUN, id, this.#runKeys, { now: new Date().toISOString(), reason });
  }

  /** blocked → running, completing it at once if nothing is left; other statuses are left alone. */
  async resumeRun(id: string): Promise<boolean> {
    return this.script(RESUME_RUN, id, this.#runKeys, { now: new Date().toISOString() });
  }

  async setStatus(id: string, status: RunStatus, reason?: string): Promise<void> {
    if (!RUN_STATUSES.includes(status)) throw new CrmSyncError('USAGE', `unknown run status ${String(status)}`);
    await this.script(SET_STATUS, id, this.#runKeys, { status, now: new Date().toISOString(), reason: reason ?? '' });
  }

  /**
   * Notes that a hold of `kind` is being lifted now (before the lift itself): an answer that
   * comes later to a request sent before this (a 401 in flight during `runs resume`) is told
   * apart from a new refusal (liftedAt). Kept an hour: far longer than any request is in flight.
   */
  async noteLift(workspace: string, kind: HoldKind): Promise<void> {
    const key = this.keys.workspaceHoldsLifted(workspace);
    await this.redis.multi().hset(key, kind, String(Date.now())).pexpire(key, LIFT_MEMORY_MS).exec();
  }

  /** When a hold of `kind` was last lifted (epoch ms), or undefined (not within the last hour). */
  async liftedAt(workspace: string, kind: HoldKind): Promise<number | undefined> {
    const raw = await this.redis.hget(this.keys.workspaceHoldsLifted(workspace), kind);
    const ms = raw === null ? NaN : Number(raw);
    return Number.isFinite(ms) ? ms : undefined;
  }

  /** Records why the workspace is held (replacing an earlier hold of the same kind). */
  async setHold(workspace: string, kind: HoldKind, reason: string): Promise<void> {
    const hold: WorkspaceHold = { reason, since: new Date().toISOString() };
    await this.redis.hset(this.keys.workspaceHolds(workspace), kind, JSON.stringify(hold));
  }

  /**
   * Lifts one kind of hold; answers whether the workspace is still held by the other (then its
   * queue must stay paused). Atomic, so two lifts never both see the other still there.
   */
  async liftHold(workspace: string, kind: HoldKind): Promise<{ lifted: boolean; stillHeld: boolean }> {
    const { lifted, holdsLeft } = await LIFT_HOLD.run(
      this.redis,
      { holdsKey: this.keys.workspaceHolds(workspace) },
      { kind },
    );
    return { lifted, stillHeld: holdsLeft > 0 };
  }

  async holds(workspace: string): Promise<Partial<Record<HoldKind, WorkspaceHold>>> {
    const raw = await this.redis.hgetall(this.keys.workspaceHolds(workspace));
    const out: Partial<Record<HoldKind, WorkspaceHold>> = {};
    for (const kind of HOLD_KINDS) {
      const v = raw[kind];
      if (v === undefined) continue;
      try {
        out[kind] = JSON.parse(v) as WorkspaceHold;
      } catch {
        out[kind] = { reason: v, since: '' };
      }
    }
    return out;
  }

  async getResult(id: string, row: number): Promise<RowResult | null> {
    const ref = await this.refOrNull(id);
    if (ref === null) return null;
    const value = await this.redis.hget(this.keys.resultBucket(ref, this.keys.bucketOf(row)), String(row));
    return value === null ? null : decodeResult(row, value);
  }

  /** The results these rows have (rows without one are left out), in one round trip. */
  async getResults(id: string, rows: number[]): Promise<RowResult[]> {
    return this.readRows(id, rows);
  }

  async problems(id: string, query: ProblemsQuery = {}): Promise<{ rows: RowResult[]; total: number }> {
    const offset = nonNegative(query.offset, 0);
    const limit = nonNegative(query.limit, DEFAULT_PAGE);
    const needle = query.messageContains?.toLowerCase();
    if (needle === undefined || needle === '') {
      const ref = await this.refOrNull(id);
      if (ref === null) return { rows: [], total: 0 };
      const key = this.keys.problems(ref);
      const [total, members] = await Promise.all([
        this.redis.zcard(key),
        limit === 0 ? Promise.resolve([]) : this.redis.zrange(key, offset, offset + limit - 1),
      ]);
      return { rows: await this.readRows(id, members.map(Number)), total };
    }
    // A text filter has to look at every problem row to know the total; it streams them in
    // batches so memory stays bounded and Redis is never blocked by one long call.
    const rows: RowResult[] = [];
    let total = 0;
    for await (const result of this.iterateResults(id, { problemsOnly: true })) {
      if (!matches(result, needle)) continue;
      if (total >= offset && rows.length < limit) rows.push(result);
      total++;
    }
    return { rows, total };
  }

  async *iterateResults(id: string, options: IterateResultsOptions = {}): AsyncIterable<RowResult> {
    const batchSize = Math.max(1, nonNegative(options.batchSize, DEFAULT_BATCH));
    if (options.problemsOnly === true) {
      const ref = await this.refOrNull(id);
      if (ref === null) return;
      let after = 0;
      for (;;) {
        const rows = await this.problemRowsAfter(ref, after, batchSize);
        if (rows.length === 0) return;
        yield* await this.readRows(id, rows);
        after = rows[rows.length - 1] ?? after;
      }
    }
    const run = await this.load(id);
    if (run === null) return;
    for (let first = 1; first <= run.maxRow; first += batchSize) {
      const rows: number[] = [];
      for (let row = first; row < first + batchSize && row <= run.maxRow; row++) rows.push(row);
      yield* await this.readRows(id, rows);
    }
  }

  /**
   * Takes failed, invalid and uncertain rows back for a retry (all of them, or `rows`). They
   * move to retry round `round`, the generation of the jobs that will carry them: jobs of an
   * earlier round can no longer send them or record their result.
   */
  /**
   * `writtenLater`: also rows an earlier retry did not send because a later run had written
   * them (code ROW_WRITTEN_LATER), for a resend. Default false.
   */
  async requeueRows(
    id: string,
    rows: number[] | undefined,
    round: number,
    writtenLater = false,
  ): Promise<RequeuedRow[]> {
    if (!Number.isSafeInteger(round) || round < 1)
      throw new CrmSyncError('USAGE', `a retry round is a positive integer, got ${round}`);
    const { ref } = await this.require(id);
    const requeued: RequeuedRow[] = [];
    const requeueChunk = async (chunk: number[]): Promise<void> => {
      const reply = await this.script(
        REQUEUE_ROWS,
        id,
        this.#rowKeys,
        { now: new Date().toISOString(), round, resend: writtenLater ? '1' : '0' },
        chunk,
      );
      for (let i = 0; i + 1 < reply.length; i += 2) {
        const result = decodeResult(Number(reply[i]), reply[i + 1] ?? '');
        const entry: RequeuedRow = { row: result.row, original: result.original ?? {}, previous: result.status };
        if (result.line !== undefined) entry.line = result.line;
        if (result.ref !== undefined) entry.ref = result.ref;
        requeued.push(entry);
      }
    };
    if (rows !== undefined) {
      for (let i = 0; i < rows.length; i += SCRIPT_CHUNK) await requeueChunk(rows.slice(i, i + SCRIPT_CHUNK));
      return requeued;
    }
    // All problem rows: take them from the front of the index until it is empty. Each chunk
    // removes what it read, so the loop ends even while workers keep recording.
    let cursor = 0;
    for (;;) {
      const chunk = await this.problemRowsAfter(ref, cursor, SCRIPT_CHUNK);
      if (chunk.length === 0) return requeued;
      await requeueChunk(chunk);
      cursor = chunk[chunk.length - 1] ?? cursor;
    }
  }

  async deleteRun(id: string): Promise<void> {
    const ref = await this.refOrNull(id);
    const run = ref === null ? null : await this.loadRef(ref);
    if (ref !== null && run !== null) {
      const { record } = run;
      // Results first, in chunks (a million-row run has 10,000 buckets); the run record goes
      // last so a delete interrupted half-way can simply be repeated.
      const lastBucket = this.keys.bucketOf(run.maxRow);
      for (let first = 0; first <= lastBucket; first += 1000) {
        const keys: string[] = [];
        for (let b = first; b < first + 1000 && b <= lastBucket; b++) keys.push(this.keys.resultBucket(ref, b));
        await this.redis.unlink(...keys);
      }
      const tx = this.redis
        .multi()
        .unlink(
          this.keys.run(ref),
          this.keys.problems(ref),
          this.keys.rounds(ref),
          this.keys.creating(ref),
          this.keys.names(ref),
        )
        .zrem(this.keys.byWorkspace(record.workspace), id)
        // What reached the history table (HistoryMarks): a gap, if any, was recorded before.
        .hdel(historyMarksKey(this.keys.prefix, record.workspace), `${id}:l`, `${id}:s`);
      for (const key of this.keys.allStatusIndexes(record.workspace)) tx.zrem(key, id);
      await tx.exec();
      if (record.syncName !== undefined) await this.redis.zrem(this.keys.bySync(record.syncName), id);
    }
    // The fleet-wide entries last (also those of a run whose record never got written).
    await this.redis.zrem(this.keys.allRuns(), id);
    await this.redis.hdel(this.keys.runWorkspaces(), id);
    this.#refs.forget(id);
  }

  /**
   * The next `limit` problem rows after row `after`, in row order: walks of the problems index go
   * by row number, not by index, so rows requeued or recorded during a walk do not shift it.
   */
  private async problemRowsAfter(ref: RunRef, after: number, limit: number): Promise<number[]> {
    const members = await this.redis.zrangebyscore(this.keys.problems(ref), `(${after}`, '+inf', 'LIMIT', 0, limit);
    return members.map(Number);
  }

  private async load(id: string): Promise<(DecodedRun & { ref: RunRef }) | null> {
    const ref = await this.refOrNull(id);
    return ref === null ? null : this.loadRef(ref);
  }

  private async loadRef(ref: RunRef): Promise<(DecodedRun & { ref: RunRef }) | null> {
    const hash = await this.redis.hgetall(this.keys.run(ref));
    return Object.keys(hash).length === 0 ? null : { ...decodeRun(hash), ref };
  }

  private async require(id: string): Promise<DecodedRun & { ref: RunRef }> {
    const run = await this.load(id);
    if (run === null) throw runNotFound(id);
    return run;
  }

  private async readRows(id: string, rows: number[]): Promise<RowResult[]> {
    if (rows.length === 0) return [];
    const ref = await this.refOrNull(id);
    if (ref === null) return [];
    // One HMGET per bucket, all in one round trip; rows keep the order they were asked in.
    const groups: number[][] = [];
    for (const row of rows) {
      const last = groups[groups.length - 1];
      const lastRow = last?.[0];
      if (last !== undefined && lastRow !== undefined && this.keys.bucketOf(lastRow) === this.keys.bucketOf(row))
        last.push(row);
      else groups.push([row]);
    }
    const pipeline = this.redis.pipeline();
    // Every group is made with its first row.
    for (const group of groups)
      pipeline.hmget(this.keys.resultBucket(ref, this.keys.bucketOf(group[0]!)), ...group.map(String));
    const replies = (await pipeline.exec()) ?? [];
    const results: RowResult[] = [];
    groups.forEach((group, g) => {
      const [error, values] = replies[g] ?? [null, []];
      if (error) throw error;
      group.forEach((row, index) => {
        const value = (values as Array<string | null>)[index];
        if (value !== null && value !== undefined) results.push(decodeResult(row, value));
      });
    });
    return results;
  }

  /** A run script's KEYS (run-scripts.ts RUN). */
  readonly #runKeys = (ref: RunRef): RunStatusKeys => this.keys.runStatusKeys(ref);

  /** The KEYS of a run script that also reads or writes rows (run-scripts.ts ROWS). */
  readonly #rowKeys = (ref: RunRef) => ({
    ...this.keys.runStatusKeys(ref),
    resultsBase: this.keys.resultsBase(ref),
    problemsKey: this.keys.problems(ref),
    roundsKey: this.keys.rounds(ref),
  });

  /** Runs one of the run's scripts, its keys named from the run's ref; RUN_NOT_FOUND as a CrmSyncError. */
  private async script<K extends string, A extends string, R>(
    script: Script<K, A, R>,
    id: string,
    keys: (ref: RunRef) => Readonly<Record<K, string>>,
    args: Readonly<Record<A, ScriptArg>>,
    rest?: readonly ScriptArg[],
  ): Promise<R> {
    const ref = await this.ref(id);
    try {
      return await script.run(this.redis, keys(ref), args, rest);
    } catch (error) {
      if (error instanceof Error && error.message.includes('RUN_NOT_FOUND')) throw runNotFound(id);
      throw error;
    }
  }
}

function runNotFound(id: string): CrmSyncError {
  return new CrmSyncError('RUN_NOT_FOUND', `no run with id ${id}`);
}

function matches(result: RowResult, needle: string): boolean {
  const haystack = [
    result.message ?? '',
    result.code ?? '',
    ...(result.errors ?? []).map((e) => `${e.field}: ${e.message}`),
  ];
  return haystack.some((text) => text.toLowerCase().includes(needle));
}
