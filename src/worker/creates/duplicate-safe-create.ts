import { createHash } from 'node:crypto';
import { BadResponseError, CrmError, TransientError, type CrmClient, type DealCreateFields } from '../../crm/index.js';
import { errorMessage, type ErrorCode } from '../../errors/index.js';
import { silentLogger, type Logger } from '../../log/index.js';
import {
  succeeded,
  uncertain,
  type CreateMarker,
  type RowFence,
  type RowResult,
  type RowWriter,
  type FieldChanges,
} from '../../runs/index.js';
import { canonicalFromRow, fieldChanges, normaliseName, sentDigest } from '../../reconcile/index.js';
import type { PacedPost } from '../paced-post.js';
import type { DealLookup } from './deal-lookup.js';

export interface DuplicateSafeCreateOptions {
  client: CrmClient;
  fence: RowFence;
  /** Where deals an uncertain create may have made are looked for (shared passes). */
  lookup: DealLookup;
  /**
   * After an answer was lost, wait this long before looking for the deal (a request held in
   * the network lands first; ms).
   */
  settleMs: number;
  logger?: Logger;
}

/** One create attempt: who writes, which row, what identical creates meet on (`fp`), an upsert's key. */
interface CreateContext {
  w: RowWriter;
  row: CreateRow;
  fp: string;
  match?: string;
  /** What the row sends, as a digest for its result (verify). */
  sent?: string | undefined;
  /** Every field the row sends, its before unknown (a new deal), for its result (`runs undo` lists it). */
  changes?: FieldChanges;
}

/** The row as the result needs it. */
export interface CreateRow {
  row: number;
  line: number;
  /** The source row's key (a database source's key column). */
  ref?: string;
  original: Record<string, string>;
  /** What its result says beside its outcome (QueuedRow.note: fields `"onUnknown": "skip-field"` left out). */
  note?: string;
}

export type CreateOutcome =
  /**
   * The deal, its claim and the row's result are stored (or a conflict/uncertain result is);
   * `result`: the stored succeeded result, for what else keeps field changes (the PostgreSQL history).
   */
  | { kind: 'recorded'; status: RowResult['status']; result?: RowResult }
  /** A result for the fenced result writer (an uncertain create). */
  | { kind: 'result'; result: RowResult }
  /** The row already has its result: nothing to send. */
  | { kind: 'has-result' }
  /** The job is no longer this worker's: send nothing, store nothing. */
  | { kind: 'lost'; reason: string }
  /** Come back in `ms` (settle time, or an identical create in flight); not an attempt. */
  | { kind: 'wait'; ms: number }
  /** An upsert of the same match key created this deal meanwhile: update it instead. */
  | { kind: 'exists'; dealId: string };

/**
 * Identical content in one workspace, as the lookup can tell deals apart (DealLookup.comparable:
 * the fields the CRM reports, names normalised): identical rows, concurrent runs and upserts of
 * the same deal meet on it and create one at a time. Rows that differ only in a field the CRM
 * never reports (`position`) meet too: their lost answers' deals could not be told apart.
 */
export function createFingerprint(fields: Readonly<Record<string, unknown>>): string {
  const canonical = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => [k, k === 'name' ? normaliseName(String(v)) : canonicalFromRow(k, v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha1').update(JSON.stringify(canonical)).digest('hex');
}

const UNCERTAIN: ErrorCode = 'CREATE_UNCERTAIN';
const CONFLICT: ErrorCode = 'CREATE_CONFLICT';

/** Longest wait before a create held up by an identical one looks again. */
const CREATE_RECHECK_MS = 5000;

/** The answer proves the POST was not applied (a 4xx, or a connection that never carried it). */
function provesNotApplied(err: unknown): boolean {
  if (err instanceof TransientError) return !err.maybeCommitted;
  return err instanceof CrmError && err.status !== undefined && err.status >= 400 && err.status < 500;
}

/**
 * Creates a deal at most once per row (docs/architecture.md, "Creates"). Before a POST the
 * fence sets the row's marker and takes the content fingerprint's lock; the deal, its claim,
 * the marker's removal and the result are then stored in one step. An answer that was lost
 * leaves the marker: the row's next attempt waits out the settle time, then looks for the deal
 * (normalised name, value, created after this row's own send by the CRM's clock, claimed by
 * nobody) and records the one unique match; no match means it was not applied and the row is
 * sent again; several matches, or a race for one, end `uncertain`, never a blind re-POST.
 */
export class DuplicateSafeCreate {
  readonly #o: DuplicateSafeCreateOptions;
  readonly #logger: Logger;
  readonly #settleMs: number;

  constructor(options: DuplicateSafeCreateOptions) {
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
    this.#settleMs = options.settleMs;
  }

  /**
   * CRM errors are thrown for the worker's verdict (retry, 429, 401, permanent failure).
   * `match`: an upsert's `key=value`: creates of one key, not of one content, meet then.
   * `post`: the POST's token, taken before the fence's call (PacedPost); it is told when the
   * POST left. Default none (the caller paces the request some other way).
   */
  async create(
    w: RowWriter,
    row: CreateRow,
    fields: DealCreateFields,
    signal?: AbortSignal,
    match?: string,
    post?: PacedPost,
  ): Promise<CreateOutcome> {
    const fp =
      match === undefined
        ? createFingerprint(this.#o.lookup.comparable(fields))
        : `m-${createHash('sha1').update(match).digest('hex')}`;
    const c: CreateContext = {
      w,
      row,
      fp,
      ...(match !== undefined ? { match } : {}),
      sent: sentDigest('deals', fields),
      changes: fieldChanges('deals', fields),
    };
    // Two turns: a lookup that proves the earlier attempt was not applied leads to one POST.
    for (let turn = 0; turn < 2; turn++) {
      const begin = await this.#o.fence.beginCreate(w, fp, this.#o.client.crmClock(), match);
      switch (begin.kind) {
        case 'has-result':
        case 'exists':
          return begin;
        case 'refused':
          return { kind: 'lost', reason: begin.reason };
        case 'wait':
          // Another row's identical create (or its settle and lookup) holds the fingerprint.
          return { kind: 'wait', ms: Math.min(begin.ms, CREATE_RECHECK_MS) };
        case 'send':
          return this.#send(c, fields, begin.marker, signal, post);
        case 'doubt': {
          const settled = await this.#resolve(c, fields, begin.marker, begin.now, signal);
          if (settled !== 'not-applied') return settled;
          await post?.renew();
        }
      }
    }
    return { kind: 'wait', ms: 1000 };
  }

  async #send(
    c: CreateContext,
    fields: DealCreateFields,
    marker: CreateMarker,
    signal?: AbortSignal,
    post?: PacedPost,
  ): Promise<CreateOutcome> {
    const { w, fp } = c;
    let id: string;
    let stamp: { createdAt: number; resolutionMs: number } | undefined;
    try {
      const onWire = post?.tried();
      const deal = await this.#o.client.createDeal(fields, {
        ...(signal ? { signal } : {}),
        ...(onWire ? { onWire } : {}),
      });
      id = deal.id;
      stamp = stampOf(deal.created_at, this.#o.client.crmClock().at);
      if (stamp === undefined && !Number.isNaN(Date.parse(deal.created_at)))
        this.#logger.warn(
          { runId: w.runId, row: w.row, dealId: id, createdAt: deal.created_at },
          'a created deal is stamped implausibly far from the clock: the record clock is not calibrated from it',
        );
    } catch (err) {
      if (err instanceof BadResponseError && err.recordId !== undefined) {
        id = err.recordId; // created, but the answer is off-spec: the deal exists all the same
      } else if (provesNotApplied(err)) {
        await this.#o.fence.releaseCreate(w, fp, marker);
        this.#logger.info(
          { runId: w.runId, row: w.row, err: errorMessage(err) },
          'create not applied (the answer proves it): the row may be sent again',
        );
        throw err;
      } else {
        // It may exist: identical rows wait on the lock through the settle time and the lookup.
        await this.#o.fence.holdCreate(w, fp, this.#settleMs + this.#o.fence.leaseMs, marker);
        this.#logger.info(
          { runId: w.runId, row: w.row, err: errorMessage(err) },
          'create answer lost: it may have been applied; the row looks for its deal after the settle time',
        );
        throw err;
      }
    }
    return this.#record(c, id, 'answer', marker, stamp);
  }

  async #resolve(
    c: CreateContext,
    fields: DealCreateFields,
    marker: CreateMarker,
    now: number,
    signal?: AbortSignal,
  ): Promise<CreateOutcome | 'not-applied'> {
    const { w, row, fp } = c;
    if (marker.dealId !== undefined) return this.#record(c, marker.dealId, 'answer', marker);
    const wait = marker.sentAt + this.#settleMs - now;
    if (wait > 0) {
      await this.#o.fence.holdCreate(w, fp, wait + this.#o.fence.leaseMs);
      return { kind: 'wait', ms: wait };
    }
    // Only a pass begun after the answer was lost can answer (a request the CRM took in late
    // was applied before the CRM dropped its answer, not necessarily within the settle time);
    // an uncertain row looks again only in a pass begun after it was left uncertain: the pass
    // that found several candidates may be the newest, and someone may have told them apart since.
    const settled = marker.sentAt + this.#settleMs;
    const settledAt = marker.uncertainAt === undefined ? settled : Math.max(settled, marker.uncertainAt + 1);
    const answer = await this.#o.lookup.find(fields, marker, settledAt, signal);
    if (answer.kind === 'wait') {
      // The workspace's next pass answers it: identical rows keep waiting on the lock meanwhile.
      await this.#o.fence.holdCreate(w, fp, answer.ms + this.#o.fence.leaseMs);
      return { kind: 'wait', ms: answer.ms };
    }
    const found = answer.ids;
    const doubtful = answer.doubtful;
    if (found.length === 1 && doubtful.length === 0) return this.#record(c, found[0]!, 'lookup', marker);
    if (found.length === 0 && doubtful.length === 0) {
      this.#logger.info(
        { runId: w.runId, row: w.row },
        'create in doubt: no deal made by it after the settle time, sending it again',
      );
      await this.#o.fence.releaseCreate(w, fp, marker);
      return 'not-applied';
    }
    await this.#o.fence.releaseCreate(w, fp, marker, true);
    const message = uncertainMessage(found, doubtful, marker);
    this.#logger.warn(
      { runId: w.runId, row: w.row, after: found.length, maybeBefore: doubtful.length },
      'create uncertain: deals equal to it were found that cannot be told apart from its own',
    );
    return { kind: 'result', result: uncertain(row, UNCERTAIN, message, row.original) };
  }

  /**
   * `answer`: the CRM named the deal; `lookup`: a lookup found it. Either way, a deal another
   * row had recorded is not this row's, and the row is in doubt, never failed: a create that got
   * a 2xx answer may have made a deal of its own (a CRM fault named another), so `failed` would
   * invite a blind re-send. `uncertain` makes `runs retry` look for the deal before anything is
   * sent (restore-create: a lookup that finds a candidate sends nothing).
   */
  async #record(
    c: CreateContext,
    dealId: string,
    how: 'answer' | 'lookup',
    marker: CreateMarker,
    stamp?: { createdAt: number; resolutionMs: number },
  ): Promise<CreateOutcome> {
    const { w, row, fp } = c;
    const found =
      how === 'lookup'
        ? 'created by an earlier attempt of this row (its answer lost, or naming another deal); found by a lookup'
        : undefined;
    // A create sent without a field says so, as an update does: its result claims only what was sent.
    const message = [found, row.note].filter(Boolean).join('; ') || undefined;
    const success = succeeded(row, dealId, message, c.sent, c.changes);
    const conflict =
      how === 'answer'
        ? uncertain(
            row,
            CONFLICT,
            `may have been created: the CRM answered 2xx with deal ${dealId}, which another row had already recorded (a fault of the CRM); not recorded as that deal, not sent again: \`runs retry\` looks for its deal before sending anything`,
            row.original,
          )
        : uncertain(
            row,
            UNCERTAIN,
            `may have been created; the matching deal ${dealId} was recorded by another row meanwhile`,
            row.original,
          );
    const done = await this.#o.fence.finishCreate(w, fp, dealId, success, conflict, marker, c.match, stamp);
    if (done.kind === 'refused' && done.reason === 'exists') {
      // Another job of this row recorded it first (a resolving job beside a redelivered one).
      this.#logger.warn(
        { runId: w.runId, row: w.row, dealId },
        'the row already had its result when this attempt finished; its stored result stands',
      );
      return { kind: 'has-result' };
    }
    if (done.kind === 'refused') {
      this.#logger.warn(
        { runId: w.runId, row: w.row, dealId, reason: done.reason },
        "created a deal after losing the job: its id is left for the job's new owner",
      );
      return { kind: 'lost', reason: done.reason };
    }
    if (done.kind === 'conflict') {
      this.#logger.warn(
        { runId: w.runId, row: w.row, dealId, claimedBy: done.claimedBy },
        'a deal this row was given is recorded by another row',
      );
      return { kind: 'recorded', status: conflict.status };
    }
    if (how === 'lookup')
      this.#logger.info(
        { runId: w.runId, row: w.row, dealId },
        'create retried: the earlier attempt had created the deal; recording it',
      );
    return { kind: 'recorded', status: 'succeeded', result: success };
  }
}

/**
 * How far a just-created deal's created_at may lie from the CRM's clock (its Date header, or
 * ours) and still calibrate the record clock: a day covers a CRM stamping local time as UTC in
 * any zone. A stamp from the 1890s, or a year ahead, is a fault of the answer, not a clock: taken,
 * it would move the bound below which a deal counts as made before a send by decades.
 */
const MAX_RECORD_STAMP_SKEW_MS = 24 * 3_600_000;

/**
 * An answered deal's created_at, to calibrate the record clock; its resolution from its form.
 * Undefined when unreadable, or implausibly far (MAX_RECORD_STAMP_SKEW_MS) from `clockAt`.
 */
function stampOf(createdAt: string, clockAt: number): { createdAt: number; resolutionMs: number } | undefined {
  const at = Date.parse(createdAt);
  if (Number.isNaN(at) || Math.abs(at - clockAt) > MAX_RECORD_STAMP_SKEW_MS) return undefined;
  return { createdAt: at, resolutionMs: /:\d\d[.,]\d/.test(createdAt) ? 1 : 1000 };
}

/** Why a row in doubt is left uncertain, naming its candidates. */
function uncertainMessage(after: string[], doubtful: string[], marker: CreateMarker): string {
  const all = [...after, ...doubtful];
  const named = `${all.slice(0, 5).join(', ')}${all.length > 5 ? ', …' : ''}`;
  const head =
    all.length === 1
      ? `may have been created: 1 unclaimed deal matches it (${named})`
      : `may have been created: ${all.length} unclaimed deals match it (${named})`;
  const why =
    doubtful.length === 0
      ? 'more than one was made after its send'
      : !marker.exact
        ? 'its marker was lost, so its send time is not known'
        : `${doubtful.length === all.length && all.length === 1 ? 'it was' : `${doubtful.length} of them were`} made too close to its send to tell which came first (or the CRM's record clock is not calibrated yet)`;
  return `${head}; ${why}; not sent again: \`runs retry\` looks again`;
}
