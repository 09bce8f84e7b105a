import { createHash } from 'node:crypto';
import type { RedisClient } from '../redis/index.js';
import { DEFAULTS, derivedSettings } from '../config/index.js';
import {
  BEGIN_CREATE,
  BEGIN_UPDATE,
  FINISH_CREATE,
  HOLD_CREATE,
  RECORD_CLOCK_DRIFT,
  RECORD_STAMP_SPREAD_MS,
  RELEASE_CREATE,
  RESTORE_CREATE,
  SETTLE_UPDATE,
  type CreateMarker,
} from './fence-scripts.js';
import { encodeResult } from './result-codec.js';
import { newRunId } from './run-id.js';
import { RunKeys, requestBudgetKey, type RunRef } from '../keys/index.js';
import { NO_CLAIM, claimKeys, type CarriedClaim, type Claimed, type ClaimKeys } from '../rate/index.js';
import type { OrderSettlement, RefusalReason } from './run-store.js';
import type { RowResult } from './run-types.js';

/**
 * Who is about to write a row: the run and row, the row's retry round as its job knows it, and
 * the job attempt (BullMQ's lock key and this attempt's token). Checked atomically by Redis
 * before every send and every result, so a worker that lost its job (a partition, a pause, a
 * kill -9 of its Redis connection) can neither send nor record.
 */
export interface RowWriter {
  runId: string;
  row: number;
  round: number;
  lockKey: string;
  token: string;
  /** The row's place in write order when not its run's (QueuedRow.orderAs). Default: `runId`. */
  orderAs?: string;
  /**
   * An earlier start of the row's job may have sent it (a worker killed, a lost answer): a value
   * read from the record now may be the row's own write, so it is no before-value.
   */
  resent?: boolean;
}

export interface RowFenceOptions {
  redis: RedisClient;
  /** Key prefix. Default DEFAULTS.config.prefix. */
  prefix?: string;
  workspace: string;
  /**
   * How long a write may be on the wire before it counts as applied: the CRM request timeout
   * plus a margin for a network that delivers late. Default: derivedSettings' writeLeaseMs of
   * the default request timeout (30 000 ms); a worker passes its workspace's.
   */
  leaseMs?: number;
  /**
   * How long a record remembers the last row applied to each field. Default: as long as a run
   * can be retried (createMarkerTtlMs of retentionMs): a retry a week later must still not put
   * an older value over a later run's.
   */
  orderWindowMs?: number;
  /**
   * How long runs are kept (the config's retention): a create's marker and a deal's claim live
   * as long as the run can be retried (createMarkerTtlMs). Default DEFAULTS.retention (30 days).
   */
  retentionMs?: number;
  /** Overrides the life retentionMs gives markers and claims (tests compress time). */
  claimTtlMs?: number;
}

/** A CRM record whose writes are ordered: `resource` is e.g. `deals`. */
export interface RecordRef {
  resource: string;
  id: string;
}

/** A field of the row that a later, already-applied row wrote: `by` is that row's seq. */
export interface WrittenLater {
  field: string;
  by: string;
}

export type BeginUpdate =
  /**
   * Send `fields`: the row's own, less those a later row already wrote (`writtenLater`); a
   * required field among those carries the later row's value, so it stays the latest.
   */
  | {
      kind: 'send';
      seq: string;
      fields: Record<string, unknown>;
      writtenLater: WrittenLater[];
      /** The row's send time, when the call carried its claim (SharedTokenBucket.carry). */
      claimed?: Claimed;
    }
  | { kind: 'has-result' }
  | { kind: 'refused'; reason: RefusalReason }
  /** Every field the row would change was written by a later row: nothing is sent. */
  | { kind: 'superseded'; by: string; writtenLater: WrittenLater[] }
  | { kind: 'wait'; ms: number };

export type { CreateMarker };

export type BeginCreate =
  | { kind: 'exists'; dealId: string }
  | { kind: 'send'; marker: CreateMarker }
  | { kind: 'doubt'; marker: CreateMarker; now: number }
  | { kind: 'wait'; ms: number }
  | { kind: 'has-result' }
  | { kind: 'refused'; reason: RefusalReason };

export type FinishCreate =
  { kind: 'recorded' } | { kind: 'conflict'; claimedBy: string } | { kind: 'refused'; reason: RefusalReason };

/**
 * The calibrated clock that stamps the CRM's records (created_at), relative to Redis' clock:
 * created_at = Redis time + o for some o in [lo, hi] (ms). From answered creates (FINISH_CREATE).
 */
export interface RecordClock {
  lo: number;
  hi: number;
  /** The resolution of created_at stamps (1 ms, or 1000 for whole seconds). */
  resolutionMs: number;
  /** How old the calibration is (ms). */
  ageMs: number;
}

/**
 * The earliest created_at a deal made at or after Redis time `at` can carry by the calibration:
 * its lower bound, less the stamp's resolution and the drift since it was taken. Where a deal
 * wrongly taken as older makes a duplicate (a lost create's lookup, verify), the spread of a
 * CRM's stamps comes off too (`withSpread`, RECORD_STAMP_SPREAD_MS).
 */
export function earliestStamp(at: number, clock: RecordClock, withSpread = false): number {
  const drift = Math.floor(clock.ageMs * RECORD_CLOCK_DRIFT);
  return Math.floor(at + clock.lo - clock.resolutionMs - drift - (withSpread ? RECORD_STAMP_SPREAD_MS : 0));
}

/**
 * A create marker's (and a deal claim's) life for a retention given in ms: derivedSettings'
 * createMarkerTtlMs (as long as its run can be retried, plus the housekeeping's margin).
 * Default: the default retention.
 */
export function createMarkerTtlMs(retentionMs?: number): number {
  return derivedSettings(retentionMs === undefined ? {} : { retentionMs }).createMarkerTtlMs;
}

const SEQ_ROW_WIDTH = 7;

/**
 * A row's place in the workspace's write order: run ids sort by creation time, rows by number
 * (base 36, fixed width, so plain string comparison in Lua orders them).
 */
export function seqOf(runId: string, row: number): string {
  return `${runId}#${row.toString(36).padStart(SEQ_ROW_WIDTH, '0')}`;
}

/**
 * The place in write order of a resend (`runs retry --resend-superseded`): after every write
 * made before `now` (a run id stamped then sorts there), and naming the run whose row it is, so
 * a row it supersedes can say which run's row wrote the field.
 */
export function resendPlace(now: Date, runId: string): string {
  return `${newRunId(now)}~${runId}`;
}

/** A seq in words: `row 11 of run …`, or `row 11 of run … (resent)` for a resend's. */
export function seqInWords(seq: string): string {
  const [place = '', row36 = ''] = seq.split('#');
  const [stamp = '', resentRun] = place.split('~');
  return `row ${parseInt(row36, 36)} of run ${resentRun ?? stamp}${resentRun ? ' (resent)' : ''}`;
}

/** The run whose row a seq is (a resend's names its run). */
export function runOfSeq(seq: string): string {
  const [place = ''] = seq.split('#');
  const [stamp = '', resentRun] = place.split('~');
  return resentRun ?? stamp;
}

/**
 * The write fence (docs/architecture.md, "Delivery guarantees"): every CRM write of a queued
 * row asks it first, and reports what the answer proved. Updates: a row is sent only while
 * its job attempt is current and it has no result, never after a later row for the same
 * record was applied (`superseded`), and never while another row's write to that record is
 * on the wire. Creates: one in flight per content fingerprint in the workspace; a marker says
 * an attempt may have been applied, and the deal, its claim and the row's result are stored in
 * one step.
 */
export class RowFence {
  readonly #redis: RedisClient;
  readonly #keys: RunKeys;
  readonly #workspace: string;
  readonly leaseMs: number;
  readonly #orderWindowMs: number;
  readonly #claimTtlMs: number;
  /** The workspace's request budget, named by a fence call that claims no send time. */
  readonly #budgetKeys: ClaimKeys;

  constructor(options: RowFenceOptions) {
    this.#redis = options.redis;
    const prefix = options.prefix ?? DEFAULTS.config.prefix;
    this.#keys = new RunKeys(prefix);
    this.#workspace = options.workspace;
    this.#budgetKeys = claimKeys(requestBudgetKey(prefix, options.workspace));
    this.leaseMs = options.leaseMs ?? derivedSettings().writeLeaseMs;
    this.#orderWindowMs = options.orderWindowMs ?? createMarkerTtlMs(options.retentionMs);
    this.#claimTtlMs = options.claimTtlMs ?? createMarkerTtlMs(options.retentionMs);
  }

  /**
   * `fields`: what the row would send; `required`: fields the request may not leave out (a
   * deal update's `name`). Order is per field: see BEGIN_UPDATE. `claim`: the row's send time,
   * claimed in the same step once the fence lets the row go (SharedTokenBucket.carry).
   */
  async beginUpdate(
    w: RowWriter,
    record: RecordRef,
    fields: Readonly<Record<string, unknown>>,
    required: readonly string[] = [],
    claim?: CarriedClaim,
  ): Promise<BeginUpdate> {
    const seq = seqOf(w.orderAs ?? w.runId, w.row);
    const values: Record<string, string> = {};
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) values[name] = JSON.stringify(value);
    const ref = this.#ref(w.runId);
    const reply = await BEGIN_UPDATE.run(
      this.#redis,
      {
        bucketKey: this.#bucketKey(ref, w.row),
        roundsKey: this.#keys.rounds(ref),
        lockKey: w.lockKey,
        orderKey: this.#orderKey(record),
        ...(claim?.keys ?? this.#budgetKeys),
      },
      {
        row: w.row,
        round: w.round,
        token: w.token,
        seq,
        leaseMs: this.leaseMs,
        windowMs: this.#orderWindowMs,
        fields: JSON.stringify(values),
        required: JSON.stringify(required),
        ...(claim?.args ?? NO_CLAIM),
      },
    );
    if (reply.kind === 'send') {
      const { fields: send, writtenLater } = fieldsToSend(values, reply.written);
      return { kind: 'send', seq, fields: send, writtenLater, ...(reply.claimed ? { claimed: reply.claimed } : {}) };
    }
    if (reply.kind === 'superseded')
      return { kind: 'superseded', by: reply.by, writtenLater: fieldsToSend(values, reply.written).writtenLater };
    return reply;
  }

  /** What ends the row's in-flight lease together with its result (RunStore.recordFenced). */
  settlement(record: RecordRef, seq: string, applied: boolean): OrderSettlement {
    return { key: this.#orderKey(record), seq, applied, windowMs: this.#orderWindowMs };
  }

  /**
   * Which of `fields` a row after `w`'s place in order already wrote to the record, as the
   * fence sees it now (a write on the wire counts): read only, for a retry that says before it
   * sends which rows a later run already wrote. The fence decides again at send time.
   */
  async laterWrites(w: Pick<RowWriter, 'runId' | 'row' | 'orderAs'>, record: RecordRef, fields: readonly string[]) {
    const seq = seqOf(w.orderAs ?? w.runId, w.row);
    const order = await this.#storedOrder(record);
    // An order value of the earlier layout is one string: a write of every field.
    const stored = 'hash' in order ? order.hash : { '*': order.legacy.split('|')[0] ?? '' };
    const star = stored['*'] ?? '';
    const inflight = stored['~'] ? (JSON.parse(stored['~']) as { s?: string; f?: Record<string, string> }) : {};
    const later: WrittenLater[] = [];
    for (const field of fields) {
      let by = star;
      const own = (stored[`f:${field}`] ?? '').split('|')[0] ?? '';
      if (own > by) by = own;
      if (inflight.s && inflight.f && field in inflight.f && inflight.s > by) by = inflight.s;
      if (by > seq) later.push({ field, by });
    }
    return later;
  }

  /**
   * Whether an earlier attempt of the row may have written the record, as the fence sees it now
   * (read only): its place in order is a field's last applied write, or the write on the wire.
   * A row that finds its values already in the record and never wrote them changes nothing.
   */
  async mayHaveWritten(w: Pick<RowWriter, 'runId' | 'row' | 'orderAs'>, record: RecordRef): Promise<boolean> {
    const seq = seqOf(w.orderAs ?? w.runId, w.row);
    const order = await this.#storedOrder(record);
    // An order value of the earlier layout is one string: `applied[|inflight|untilMs]`.
    if ('legacy' in order) return order.legacy.split('|').slice(0, 2).includes(seq);
    const stored = order.hash;
    if (stored['*'] === seq) return true;
    const inflight = stored['~'] ? (JSON.parse(stored['~']) as { s?: string }) : {};
    if (inflight.s === seq) return true;
    return Object.entries(stored).some(([name, v]) => name.startsWith('f:') && v.split('|')[0] === seq);
  }

  /** A record's write order as stored: its hash, or the one string of the earlier layout. */
  async #storedOrder(record: RecordRef): Promise<{ hash: Record<string, string> } | { legacy: string }> {
    const key = this.#orderKey(record);
    try {
      return { hash: await this.#redis.hgetall(key) };
    } catch (err) {
      if (!(err instanceof Error && err.message.startsWith('WRONGTYPE'))) throw err;
      return { legacy: (await this.#redis.get(key)) ?? '' };
    }
  }

  /** Ends the row's in-flight lease; `applied` false only when the answer proved nothing was written. */
  async settleUpdate(record: RecordRef, seq: string, applied: boolean): Promise<void> {
    await SETTLE_UPDATE.run(
      this.#redis,
      { orderKey: this.#orderKey(record) },
      { seq, applied: applied ? '1' : '0', windowMs: this.#orderWindowMs },
    );
  }

  /**
   * `lockId`: what identical creates meet on (the content fingerprint, or an upsert's match
   * key); `match`: an upsert's `key=value`, whose deal, once any row created it, is the answer.
   */
  async beginCreate(
    w: RowWriter,
    lockId: string,
    crmClock: { at: number; measured: boolean },
    match?: string,
  ): Promise<BeginCreate> {
    const ref = this.#ref(w.runId);
    return BEGIN_CREATE.run(
      this.#redis,
      {
        bucketKey: this.#bucketKey(ref, w.row),
        roundsKey: this.#keys.rounds(ref),
        lockKey: w.lockKey,
        markersKey: this.#keys.creating(ref),
        createLock: this.#keys.createLock(this.#workspace, lockId),
        upsertedKey: this.#upsertedKey(match),
      },
      {
        row: w.row,
        round: w.round,
        token: w.token,
        owner: ownerOf(w),
        leaseMs: this.leaseMs,
        markerTtlMs: this.#claimTtlMs,
        crmClockMs: Math.round(crmClock.at),
        measured: crmClock.measured ? '1' : '0',
        isUpsert: match ? '1' : '0',
      },
    );
  }

  /**
   * Records `dealId` as the row's deal: claim, marker, lock and result in one step. `conflict`
   * is the result stored when another row had already recorded that deal.
   */
  async finishCreate(
    w: RowWriter,
    lockId: string,
    dealId: string,
    success: RowResult,
    conflict: RowResult,
    marker?: CreateMarker,
    match?: string,
    stamp?: { createdAt: number; resolutionMs: number },
  ): Promise<FinishCreate> {
    const k = this.#keys;
    const ref = this.#ref(w.runId);
    const keys = {
      ...k.runStatusKeys(ref),
      resultsBase: k.resultsBase(ref),
      problemsKey: k.problems(ref),
      roundsKey: k.rounds(ref),
      lockKey: w.lockKey,
      markersKey: k.creating(ref),
      createLock: k.createLock(this.#workspace, lockId),
      claimKey: k.dealClaim(this.#workspace, dealId),
      upsertedKey: this.#upsertedKey(match),
      recordClock: this.#recordClockKey(),
    };
    return FINISH_CREATE.run(this.#redis, keys, {
      now: new Date().toISOString(),
      row: w.row,
      round: w.round,
      token: w.token,
      owner: ownerOf(w),
      deal: dealId,
      success: encodeResult(success),
      conflict: encodeResult(conflict),
      claimTtlMs: this.#claimTtlMs,
      sentAt: marker ? String(marker.sentAt) : '',
      isUpsert: match ? '1' : '0',
      createdAt: stamp && marker?.exact ? String(stamp.createdAt) : '',
      resolutionMs: stamp ? String(stamp.resolutionMs) : '1',
      clockTtlMs: this.#claimTtlMs,
    });
  }

  /**
   * The attempt ends without a deal: releases the fingerprint's lock, and removes this
   * attempt's marker unless `keepMarker` (the create stays in doubt for a later look).
   */
  async releaseCreate(w: RowWriter, fingerprint: string, marker: CreateMarker, keepMarker = false): Promise<void> {
    const ref = this.#ref(w.runId);
    await RELEASE_CREATE.run(
      this.#redis,
      {
        markersKey: this.#keys.creating(ref),
        createLock: this.#keys.createLock(this.#workspace, fingerprint),
        bucketKey: this.#bucketKey(ref, w.row),
      },
      { row: w.row, owner: ownerOf(w), sentAt: String(marker.sentAt), keep: keepMarker ? '1' : '0' },
    );
  }

  /**
   * `runs retry` of rows whose create may have been applied: a row whose marker is gone gets one
   * back (not exact, sent after `since`), so it looks for its deal before sending. How many.
   */
  async restoreMarkers(runId: string, rows: readonly number[], since: number): Promise<number> {
    if (rows.length === 0) return 0;
    const ref = this.#ref(runId);
    return RESTORE_CREATE.run(
      this.#redis,
      { markersKey: this.#keys.creating(ref), resultsBase: this.#keys.resultsBase(ref) },
      { markerTtlMs: this.#claimTtlMs, since: Math.floor(since) },
      rows,
    );
  }

  /** The workspace's calibrated record clock, or undefined before any answered create showed it. */
  async recordClock(): Promise<RecordClock | undefined> {
    const [raw, [sec, usec]] = await Promise.all([this.#redis.get(this.#recordClockKey()), this.#redis.time()]);
    const m = /^(-?\d+)\|(-?\d+)\|(\d+)\|(\d+)$/.exec(raw ?? '');
    if (!m) return undefined;
    const now = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    return { lo: Number(m[1]), hi: Number(m[2]), resolutionMs: Number(m[4]), ageMs: Math.max(0, now - Number(m[3])) };
  }

  /**
   * Keeps the fingerprint's lock for `ms` (an uncertain answer: identical rows wait for the
   * lookup). With `lost`, the attempt's answer was just lost: its marker is stamped so the
   * lookup waits for a pass begun after this moment (CreateMarker.uncertainAt).
   */
  async holdCreate(w: RowWriter, fingerprint: string, ms: number, lost?: CreateMarker): Promise<void> {
    const ref = this.#ref(w.runId);
    await HOLD_CREATE.run(
      this.#redis,
      {
        createLock: this.#keys.createLock(this.#workspace, fingerprint),
        markersKey: this.#keys.creating(ref),
        bucketKey: this.#bucketKey(ref, w.row),
      },
      { owner: ownerOf(w), ms: Math.max(1, Math.round(ms)), row: w.row, sentAt: lost ? String(lost.sentAt) : '' },
    );
  }

  /** The writer's job attempt still holds the job (its lock has the attempt's token). */
  async holdsJob(w: Pick<RowWriter, 'lockKey' | 'token'>): Promise<boolean> {
    return (await this.#redis.get(w.lockKey)) === w.token;
  }

  /**
   * Rows among `rows` whose create may have been applied: a marker is left, or the send evidence
   * beside the row's result (which outlives the markers' TTL). One round trip.
   */
  async createsInDoubt(runId: string, rows: readonly number[]): Promise<Set<number>> {
    if (rows.length === 0) return new Set();
    const ref = this.#ref(runId);
    const k = this.#keys;
    const pipeline = this.#redis.pipeline().hmget(k.creating(ref), ...rows.map(String));
    for (const row of rows) pipeline.hexists(k.resultBucket(ref, k.bucketOf(row)), k.sentField(row));
    const replies = (await pipeline.exec()) ?? [];
    for (const [err] of replies) if (err) throw err;
    const markers = (replies[0]?.[1] ?? []) as Array<string | null>;
    return new Set(rows.filter((_, i) => markers[i] !== null || replies[i + 1]?.[1] === 1));
  }

  /** The ids among `dealIds` that some row of the workspace has recorded. */
  async claimed(dealIds: readonly string[]): Promise<Set<string>> {
    if (dealIds.length === 0) return new Set();
    const owners = await this.#redis.mget(...dealIds.map((id) => this.#keys.dealClaim(this.#workspace, id)));
    return new Set(dealIds.filter((_, i) => owners[i] !== null));
  }

  #bucketKey(ref: RunRef, row: number): string {
    return this.#keys.resultBucket(ref, this.#keys.bucketOf(row));
  }

  /** A run of this fence's workspace (the fence serves one workspace's queue). */
  #ref(runId: string): RunRef {
    return { id: runId, workspace: this.#workspace };
  }

  #recordClockKey(): string {
    return this.#keys.recordClock(this.#workspace);
  }

  /** The match key's record, or (no match) a key of the same workspace that is never read. */
  #upsertedKey(match: string | undefined): string {
    return this.#keys.upserted(this.#workspace, match ? createHash('sha1').update(match).digest('hex') : 'none');
  }

  #orderKey(record: RecordRef): string {
    return this.#keys.recordOrder(this.#workspace, record.resource, record.id);
  }
}

/**
 * A row whose every field but the required ones a later row wrote sends nothing (BEGIN_UPDATE
 * decides the same at send time): `superseded`.
 */
export function wouldBeSuperseded(
  fields: readonly string[],
  required: readonly string[],
  writtenLater: readonly WrittenLater[],
): boolean {
  const later = new Set(writtenLater.map((w) => w.field));
  return later.size > 0 && fields.every((f) => required.includes(f) || later.has(f));
}

/**
 * BEGIN_UPDATE's `written` (field → {by, v?}) against the row's values: what to send, and
 * which fields a later row wrote. A required field is sent with the later row's value `v`.
 */
function fieldsToSend(
  values: Record<string, string>,
  writtenJson: string,
): { fields: Record<string, unknown>; writtenLater: WrittenLater[] } {
  const parsed: unknown = writtenJson === '' ? {} : JSON.parse(writtenJson);
  // cjson encodes an empty table as {}; anything else from the script is an object of entries.
  const written = (parsed !== null && typeof parsed === 'object' ? parsed : {}) as Record<
    string,
    { by: string; v?: string }
  >;
  const fields: Record<string, unknown> = {};
  for (const [name, json] of Object.entries(values)) {
    const later = written[name];
    if (!later) fields[name] = JSON.parse(json);
    else if (later.v !== undefined) fields[name] = JSON.parse(later.v);
  }
  const writtenLater = Object.entries(written)
    .map(([field, { by }]) => ({ field, by }))
    .sort((a, b) => a.field.localeCompare(b.field));
  return { fields, writtenLater };
}

function ownerOf(w: RowWriter): string {
  return `${w.runId}/${w.row}`;
}
