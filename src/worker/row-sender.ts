import {
  BadResponseError,
  CrmError,
  TransientError,
  OPERATION_TABLE,
  type CrmClient,
  isCreatePayload,
} from '../crm/index.js';
import { DEFAULTS } from '../config/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import type { SharedTokenBucket, TokenWait } from '../rate/index.js';
import type { PlannedWindow, QueuedRow, RowPayload } from '../queue/index.js';
import { fieldChanges, sentDigest } from '../reconcile/index.js';
import type { DuplicateSafeCreate } from './creates/index.js';
import type { DriftAnswer, DriftCheck } from './drift-check.js';
import type { PacedPost } from './paced-post.js';
import { updateInDoubt } from './row-results.js';
import {
  placeOf,
  changedSinceRunWords,
  drifted,
  skipped,
  succeeded,
  superseded,
  type OrderSettlement,
  type RecordRef,
  type RowFence,
  type RowResult,
  seqInWords,
  type RowWriter,
  type WrittenLater,
} from '../runs/index.js';

/** What sending one row came to. */
export type SendOutcome =
  /** A result for the fenced result writer, and the write order it settles (an applied update). */
  | { kind: 'result'; result: RowResult; settles?: OrderSettlement }
  /** The result is already stored (a create's deal, claim and result go in one step); `result`: a succeeded one. */
  | { kind: 'recorded'; status: RowResult['status']; result?: RowResult }
  /** The row had its result before this attempt: nothing was sent. */
  | { kind: 'has-result' }
  /** The job is no longer this worker's: nothing more may be sent or stored. */
  | { kind: 'lost'; reason: string }
  /**
   * The row's run stopped before its request was sent (cancelled, failed because Redis evicted
   * keys, or its record is gone): nothing was sent. WorkerCore.recordStopped records its rows.
   */
  | { kind: 'cancelled' }
  /** Not now: another write to the record (or an identical create) is on the wire. */
  | { kind: 'wait'; ms: number }
  /** The CRM call failed: the worker's verdict decides (retry, pause, fail). */
  | { kind: 'error'; err: unknown };

export interface RowSenderOptions {
  client: CrmClient;
  fence: RowFence;
  creates: DuplicateSafeCreate;
  logger: Logger;
  /**
   * The workspace's request budget: an update's send time is claimed in the write fence's call
   * (SharedTokenBucket.carry), and it sends only once both said yes and its token has come
   * (usableForMs).
   */
  budget: Pick<SharedTokenBucket, 'carry' | 'reserve' | 'usableForMs'>;
  /**
   * The longest an update waits for its token while it holds its record's write lease: past
   * it, the lease is given back unused and the row waits its turn again. It must leave the
   * request its whole timeout inside the lease. Default RATE_WAIT_MS.
   */
  rateWaitMs?: number;
  /** Checks a planned row's record still holds the plan's before-values (QueuedRow.expect). */
  drift?: DriftCheck;
  /** Plain rows read their before-values from list pages (`drift`). Default true. */
  readBefore?: boolean;
}

/**
 * Half the write lease's margin over the request timeout (workspace-roster: timeout + 15 s):
 * a token wait this long plus a whole request still end inside the lease.
 */
export const RATE_WAIT_MS = 7_500;

type UpdatePayload = Exclude<RowPayload, { op: 'deal.create' }>;

/** What a row's write goes over, as fieldChanges takes it (undefined: not known). */
type BeforeValues = Parameters<typeof fieldChanges>[2];
type UpdateResource = (typeof OPERATION_TABLE)[UpdatePayload['op']]['resource'];

type TokenAnswer = 'taken' | 'late' | 'aborted' | { err: unknown };
/** Before-values read, or the read's failure (only when the job's signal aborted). */
type BeforeRead = { values: BeforeValues } | { err: unknown };

/** Longest wait before a row blocked by another write to its record looks again. */
const RECHECK_MS = 1000;

/**
 * Sends one queued row through the write fence (docs/architecture.md, "Delivery guarantees"):
 * an update only while its job attempt is current, the row has no result and no later row for
 * its record was applied; a create through the duplicate-safe create. Every request carries
 * the job's abort signal, so losing the job lock cancels it.
 */
export class RowSender {
  /** Until when rows go on without reading before-values (a failed or late read; #before). */
  #beforeOffUntil = 0;

  constructor(private readonly o: RowSenderOptions) {}

  /** `post`: a create's token, taken before (PacedPost); an update takes its own here. */
  async send(w: RowWriter, r: QueuedRow, signal: AbortSignal | undefined, post?: PacedPost): Promise<SendOutcome> {
    if (signal?.aborted) return { kind: 'lost', reason: String(signal.reason) };
    const { payload } = r;
    if (isCreatePayload(payload)) {
      if (r.planned !== undefined && this.o.drift) {
        const drift = await this.#plannedCreate(w, r, payload, r.planned, signal);
        if (drift) return drift;
      }
      let out;
      try {
        out = await this.o.creates.create(w, r, payload.fields, signal, payload.match, post);
      } catch (err) {
        return signal?.aborted ? { kind: 'lost', reason: String(signal.reason) } : { kind: 'error', err };
      }
      // The write fence refused the POST because the run stopped (cancelled, failed for evicted
      // keys, gone): the row was not sent.
      if (out.kind === 'lost' && runStopped(out.reason)) return { kind: 'cancelled' };
      if (out.kind !== 'exists') return out;
      // A planned create whose key another upsert created meanwhile: the plan said "create",
      // and the CRM now has one; a new plan decides what to write to it.
      if (r.planned !== undefined)
        return {
          kind: 'result',
          result: drifted(
            r,
            `not sent: the plan creates it, but ${payload.match} was created since the plan: ${out.dealId}`,
          ),
        };
      // A concurrent upsert created this key first: this row updates that deal instead.
      this.o.logger.info(
        { runId: w.runId, row: r.row, dealId: out.dealId },
        'another upsert created this deal meanwhile: updating it instead of creating a second one',
      );
      return this.#updateRow(w, r, { op: 'deal.update', id: out.dealId, fields: payload.fields }, signal);
    }
    return this.#updateRow(w, r, payload, signal);
  }

  /**
   * A planned create goes only while the CRM has no deal the plan did not see (DriftCheck
   * .checkCreate): undefined when it may go on. A row with a create marker sent its POST before
   * and its own deal may be in the list: it is not checked (the duplicate-safe create settles it).
   */
  async #plannedCreate(
    w: RowWriter,
    r: QueuedRow,
    payload: Extract<RowPayload, { op: 'deal.create' }>,
    window: PlannedWindow,
    signal: AbortSignal | undefined,
  ): Promise<SendOutcome | undefined> {
    try {
      if ((await this.o.fence.createsInDoubt(w.runId, [w.row])).size > 0) return undefined;
      const planned = { ...window, runId: w.runId, ...(payload.match !== undefined ? { match: payload.match } : {}) };
      const answer = await this.o.drift!.checkCreate(payload.fields, planned, signal);
      if (answer.kind === 'drifted') return { kind: 'result', result: drifted(r, answer.message) };
      return undefined;
    } catch (err) {
      return signal?.aborted ? { kind: 'lost', reason: String(signal.reason) } : { kind: 'error', err };
    }
  }

  async #updateRow(
    w: RowWriter,
    r: QueuedRow,
    payload: UpdatePayload,
    signal: AbortSignal | undefined,
  ): Promise<SendOutcome> {
    const { resource, updateRequired } = OPERATION_TABLE[payload.op];
    const record: RecordRef = { resource, id: payload.id };
    // A planned row (crm-sync apply) goes only while its record holds what the plan saw: checked
    // before the fence, so no record's write lease is held while the list is read.
    // Fields that already hold what the row writes, and that no attempt of the row wrote: the
    // write changes nothing there (another undo of the same run put them back, a person typed
    // the same value), so they are not recorded as changed — and a row of only such fields is
    // `skipped` unchanged, not sent.
    let unchanged: readonly string[] = [];
    if (r.expect && this.o.drift) {
      try {
        const answer = await this.o.drift.check(w.runId, resource, payload.id, r.expect, payload.fields, {
          ...(signal ? { signal } : {}),
          ...(r.listPlace !== undefined ? { place: r.listPlace } : {}),
        });
        if (answer.kind === 'drifted') return { kind: 'result', result: driftedRow(r, answer, payload.id) };
        if (answer.already && !(await this.o.fence.mayHaveWritten(w, record))) {
          const already = answer.already;
          if (Object.keys(r.expect).every((f) => already.includes(f)))
            return { kind: 'result', result: unchangedRow(r, already, payload.id) };
          unchanged = already;
        }
      } catch (err) {
        return signal?.aborted ? { kind: 'lost', reason: String(signal.reason) } : { kind: 'error', err };
      }
    }
    // What the row writes over (RowResult.changes, for `runs undo`): a planned or reconciled row
    // carries it; a plain import's is read from the list (shared passes in the budget). The read
    // and the fence call run side by side (each is a round trip or more); the request waits for
    // both, so the list read still ends before the write is sent. Most rows know theirs at once
    // (carried, or a fresh list read): those claim their send time in the fence's call. A row
    // whose read is still out takes its token only once the read is in: the read's pages take
    // tokens of the same budget, behind the rows' own, and a token held through the read is
    // stale by its end (usableForMs) — at a run's start 8 rows' tokens came before the first
    // page's, ~160 ms of a 50/s budget spent on nothing.
    const known = this.#knownBefore(w.runId, r, resource, payload.id);
    const before: Promise<BeforeRead> | BeforeRead =
      known ??
      this.#before(w.runId, resource, payload.id, signal).then(
        (values) => ({ values }),
        (err: unknown) => ({ err }),
      );
    // A row that knows its before-values claims its send time in the fence's own call (one round
    // trip for both); the others take theirs once the read is in.
    const carried = known ? this.o.budget.carry(signal, this.o.rateWaitMs ?? RATE_WAIT_MS) : undefined;
    let tokenWait = carried ? { wait: carried.wait, token: tokenAnswer(carried.wait, signal) } : undefined;
    let begin;
    try {
      begin = await this.o.fence.beginUpdate(w, record, payload.fields, updateRequired, carried?.claim);
    } finally {
      // A wait the fence let go has its send time (or waits its turn); one it stopped is called off
      // first, so that its claim's unused grants go back without a claim made for it.
      if (begin?.kind !== 'send') tokenWait?.wait.cancel();
      carried?.answered(begin?.kind === 'send' ? begin.claimed : undefined);
    }
    switch (begin.kind) {
      case 'send': {
        // The token is used only within usableForMs of its grant, so the request leaves at its
        // grant's time: sent late, bunched against on-time ones, a CRM counting a sliding window
        // would see more than the limit in one. The wait is bounded, since the record's lease is
        // held meanwhile.
        const read = 'then' in before ? await before : before;
        let token: TokenAnswer;
        // The wait whose token the request is sent on.
        let paced: TokenWait | undefined;
        // (#before fails only when the job's signal aborted.)
        if ('err' in read) {
          tokenWait?.wait.cancel();
          token = 'aborted';
        } else {
          tokenWait ??= this.#waitForToken(signal);
          token = await tokenWait.token;
          paced = tokenWait.wait;
          if (token === 'taken' && Date.now() - tokenWait.wait.takenAt! > this.o.budget.usableForMs) {
            tokenWait.wait.cancel();
            const again = this.#waitForToken(signal);
            token = await again.token;
            paced = again.wait;
          }
        }
        if (token !== 'taken' || 'err' in read || !paced) {
          await this.o.fence.settleUpdate(record, begin.seq, false);
          if (token === 'taken' || token === 'aborted') return { kind: 'lost', reason: String(signal?.reason) };
          if (token === 'late') return { kind: 'wait', ms: 0 };
          return { kind: 'error', err: token.err };
        }
        // Fields a later row already wrote are left out: sending them would put older values back.
        const fields = begin.fields as UpdatePayload['fields'];
        // An update's payload is {op, id, fields} (crm/operations.ts): built, not spread.
        const sent = { op: payload.op, id: payload.id, fields } as UpdatePayload;
        return this.#update(
          r,
          sent,
          record,
          begin.seq,
          signal,
          paced,
          begin.writtenLater,
          read.values,
          w.resent === true,
          unchanged,
        );
      }
      case 'superseded':
        return { kind: 'result', result: supersededBy(r, begin.writtenLater) };
      case 'refused':
        // Checked in the same step as the send decision: after a cancel lands no row goes out.
        if (runStopped(begin.reason)) return { kind: 'cancelled' };
        return { kind: 'lost', reason: `refused by the write fence (${begin.reason})` };
      case 'wait':
        // The lease only bounds a write whose worker vanished; most end in milliseconds.
        return { kind: 'wait', ms: Math.min(begin.ms, RECHECK_MS) };
      default:
        return begin;
    }
  }

  /**
   * The before-values a row's result keeps when they are known now: the plan's, the planner's,
   * a fresh list read's, or none to read (rows go without them for now). Undefined when a list
   * read is needed (#before).
   */
  #knownBefore(runId: string, r: QueuedRow, resource: UpdateResource, id: string): BeforeRead | undefined {
    const listed = r.expect ?? r.before;
    if (listed !== undefined) return { values: { listed } };
    if (!this.o.drift || this.o.readBefore === false || Date.now() < this.#beforeOffUntil) return { values: undefined };
    const fresh = this.o.drift.freshValues(runId, resource, id);
    if (fresh) return { values: fresh.values !== undefined ? { record: fresh.values } : undefined };
    return undefined;
  }

  /**
   * The before-values of a plain row from a list read. Never holds a row up for long, never
   * fails it: a read that fails, or has not answered within DEFAULTS.worker.beforeReadWaitMs,
   * leaves the row's before unknown, and rows of this process skip the read for
   * beforeReadPauseMs (a CRM failing its list pages fails no row twice).
   */
  async #before(
    runId: string,
    resource: UpdateResource,
    id: string,
    signal: AbortSignal | undefined,
  ): Promise<BeforeValues> {
    const drift = this.o.drift!;
    const { beforeReadWaitMs, beforeReadPauseMs } = DEFAULTS.worker;
    const read = drift.values(runId, resource, id, signal);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), beforeReadWaitMs)));
    try {
      const record = await Promise.race([read, late]);
      if (record !== 'late') return record !== undefined ? { record } : undefined;
      read.catch(() => undefined);
      this.#beforeOffUntil = Date.now() + beforeReadPauseMs;
      this.o.logger.warn({ runId, resource }, 'list read of before-values is late: rows go on without them for now');
      return undefined;
    } catch (err) {
      if (signal?.aborted) throw err;
      this.#beforeOffUntil = Date.now() + beforeReadPauseMs;
      this.o.logger.warn(
        { runId, resource, err: errorMessage(err) },
        'list read of before-values failed: rows go on without them for now',
      );
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  /** A token within `rateWaitMs`: 'late' when the budget had none by then (nothing was sent). */
  #waitForToken(signal: AbortSignal | undefined): { wait: TokenWait; token: Promise<TokenAnswer> } {
    const wait = this.o.budget.reserve(signal, this.o.rateWaitMs ?? RATE_WAIT_MS);
    return { wait, token: tokenAnswer(wait, signal) };
  }

  async #update(
    r: QueuedRow,
    payload: UpdatePayload,
    record: RecordRef,
    seq: string,
    signal: AbortSignal | undefined,
    paced: TokenWait,
    writtenLater: readonly WrittenLater[],
    before: BeforeValues,
    mayHoldOwnWrite: boolean,
    unchanged: readonly string[],
  ): Promise<SendOutcome> {
    const base = placeOf(r);
    const partly = partlySent(payload.fields, writtenLater);
    // A resent row's place in order is the retry's, after every write before it.
    const resent = r.orderAs
      ? 'sent as a new write (runs retry --resend-superseded): these values are now the latest'
      : undefined;
    const note = [resent, partly, r.note].filter(Boolean).join('; ') || undefined;
    // When it left: a late request's place in the budget's send log moves there (TokenWait.sent).
    const opts = { ...(signal ? { signal } : {}), onWire: (at: number) => paced.sent(at) };
    const { resource } = OPERATION_TABLE[payload.op];
    const sent = sentDigest(resource, payload.fields);
    // An applied write's lease ends with its result, in the same script call.
    const settles = this.o.fence.settlement(record, seq, true);
    try {
      const answered = await this.o.client.updateAnswered(payload, opts);
      // The values after are the CRM's answer (a normalising CRM stores other text than sent).
      const changes = fieldChanges(resource, payload.fields, before, { resent: mayHoldOwnWrite, answered });
      for (const f of unchanged) delete changes[f];
      return { kind: 'result', result: succeeded(base, answered.id, note, sent, changes), settles };
    } catch (err) {
      if (err instanceof BadResponseError && err.recordId === payload.id) {
        // A 2xx naming the record: the write happened even though the body is off-spec.
        this.o.logger.warn({ row: r.row, err: err.message }, 'write applied, answer did not match the spec');
        const message = `applied; the CRM's answer did not match the spec (${err.message})${note ? `; ${note}` : ''}`;
        const changes = fieldChanges(resource, payload.fields, before, { resent: mayHoldOwnWrite });
        for (const f of unchanged) delete changes[f];
        return { kind: 'result', result: succeeded(base, payload.id, message, sent, changes), settles };
      }
      if (err instanceof BadResponseError) {
        // A 2xx that does not name the record written to (another id, or none): a CRM fault.
        // The write may have happened, so the row is in doubt — never failed (a re-import
        // would write again blind), never recorded under the answer's id.
        this.o.logger.warn(
          { row: r.row, recordId: payload.id, answeredId: err.answeredId, err: err.message },
          'update answered for another record than the one written to: the row is uncertain',
        );
        return { kind: 'result', result: updateInDoubt(base, payload.id, err, r.original), settles };
      }
      // A write that may have reached the CRM holds its place in the record's order.
      await this.o.fence.settleUpdate(record, seq, mayHaveApplied(err));
      if (signal?.aborted) return { kind: 'lost', reason: String(signal.reason) };
      return { kind: 'error', err };
    }
  }
}

/** What a token wait came to, as the sender acts on it (a rejection once the job's signal aborted: 'aborted'). */
function tokenAnswer(wait: TokenWait, signal: AbortSignal | undefined): Promise<TokenAnswer> {
  return wait.granted.then(
    (taken): TokenAnswer => (taken ? 'taken' : 'late'),
    (err: unknown): TokenAnswer => (signal?.aborted ? 'aborted' : { err }),
  );
}

/** The fence's refusals that stop every row of the run, not just this attempt's. */
function runStopped(reason: string): boolean {
  return reason === 'cancelled' || reason === 'halted' || reason === 'gone';
}

function mayHaveApplied(err: unknown): boolean {
  if (err instanceof TransientError) return err.maybeCommitted;
  return !(err instanceof CrmError && err.status !== undefined);
}

/** Which later rows wrote which fields: `status by row 11 of run …; owner_id by row 12 of run …`. */
function laterWrites(writtenLater: readonly WrittenLater[]): string {
  const byRow = new Map<string, string[]>();
  for (const { field, by } of writtenLater) byRow.set(by, [...(byRow.get(by) ?? []), field]);
  return [...byRow].map(([by, fields]) => `${fields.join(', ')} by ${seqInWords(by)}`).join('; ');
}

/**
 * A row sent in part says what it sent and what it left out, so its result claims only what
 * happened. Undefined when the row was sent whole.
 */
function partlySent(
  sent: Readonly<Record<string, unknown>>,
  writtenLater: readonly WrittenLater[],
): string | undefined {
  if (writtenLater.length === 0) return undefined;
  const kept = writtenLater.filter((w) => w.field in sent).map((w) => w.field);
  const own = Object.keys(sent).filter((f) => !kept.includes(f));
  const left = writtenLater.filter((w) => !kept.includes(w.field));
  const parts = [`sent ${own.join(', ')}`];
  if (left.length > 0) parts.push(`not sent: ${laterWrites(left)} (written later and applied first)`);
  if (kept.length > 0) parts.push(`${kept.join(', ')} sent as the later row wrote it (the request requires it)`);
  return parts.join('; ');
}

/** Not sent at all: later rows wrote every field this row would change. */
function supersededBy(r: QueuedRow, writtenLater: readonly WrittenLater[]): RowResult {
  return superseded(
    r,
    `not sent: later rows wrote every field this row would change and were applied first (${laterWrites(writtenLater)})`,
  );
}

/**
 * A planned update whose record no longer holds the plan's before-values: `drifted`, or for an
 * undo run's row (QueuedRow.undo) whose fields to put back changed, `skipped` "changed since the
 * run" naming the values now, as its plan records a field changed before the undo's read. One
 * request writes the row, so its other fields are not put back either (said; `runs undo` of the
 * run again puts them back). An undo row whose only change is in a field it carries unchanged (a
 * deal's name, renamed since the undo's plan) stays `drifted`: the run never wrote that field. A
 * record gone from the list stays `drifted`.
 */
function driftedRow(r: QueuedRow, answer: Extract<DriftAnswer, { kind: 'drifted' }>, id: string): RowResult {
  const since = answer.changed?.filter((c) => c.carried === undefined) ?? [];
  if (!r.undo || since.length === 0) return drifted(r, answer.message, id);
  const words = since.map((c) => changedSinceRunWords(c.field, c.now, c.planned));
  const changed = new Set(since.map((c) => c.field));
  const held = Object.keys(r.expect ?? {}).filter((f) => !changed.has(f));
  const rest =
    held.length > 0
      ? `; ${held.join(', ')} not put back with it (one request writes the row): undo the run again to put ${held.length > 1 ? 'them' : 'it'} back`
      : '';
  return skipped(r, `not put back: ${words.join('; ')}${rest}`, id);
}

/** A planned update whose record already holds every value it writes, none of them by this row: nothing sent. */
function unchangedRow(r: QueuedRow, fields: readonly string[], id: string): RowResult {
  return skipped(r, `unchanged: the record already holds the ${fields.join(', ')} this row writes; nothing sent`, id);
}
