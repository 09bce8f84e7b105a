import { AuthError, CrmError, RateLimitedError, RejectedError, TransientError, isPermanent } from '../crm/index.js';
import { DEFAULTS } from '../config/index.js';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import type { OrderSettlement, RowResult } from '../runs/index.js';
import type { BreakerVerdict } from './circuit-breaker.js';
import type { SendOutcome } from './row-sender.js';

/*
 * What the worker does with each CRM answer (docs/architecture.md, "Errors"), decided from
 * facts alone: the callers read Redis, the clock and the breaker, and carry out the decision.
 * Kept pure so every branch is a row of a table test (test/worker/answer-decision.test.ts).
 */

/** What an error means for the job: pause the workspace (429, 401), retry later, or a final failure. */
export type Verdict =
  /** `pauseMs`: how long the workspace's queue and bucket hold back. */
  | { kind: 'rate-limited'; err: RateLimitedError; pauseMs: number }
  /** `sentAt`: when the refused request's row started on its way (epoch ms), when known. */
  | { kind: 'blocked'; err: AuthError; sentAt?: number }
  /** The circuit breaker holds the workspace: the job goes back without spending an attempt. */
  | { kind: 'unreachable'; reason: string }
  | { kind: 'retry'; err: unknown }
  | { kind: 'fail'; err: unknown };
export type PauseVerdict = Extract<Verdict, { kind: 'rate-limited' | 'blocked' | 'unreachable' }>;

/** Where the job stood when the error came back. */
export interface JobFacts {
  /** Starts so far, 429 requeues included, and the worker's cap on them. */
  attemptsStarted: number;
  maxStarts: number;
  /** BullMQ's attempts spent before this one, and allowed. */
  attemptsMade: number;
  attempts: number;
  /** The job holds several rows: its start cap is not one row's to fail on. */
  sharedStarts: boolean;
}

/** The request counter's status label for a failed request: its HTTP status, or `network` when none came. */
export function requestStatus(err: unknown): string {
  return err instanceof CrmError && err.status !== undefined ? String(err.status) : 'network';
}

export interface ErrorDecision {
  verdict: Verdict;
  /** A transient failure the outage watch counts (not one the workspace is paused for). */
  outage: boolean;
}

/** Floor for a 429's pause: a Retry-After of 0 or a past date must not spin the job through its starts. */
const MIN_RATE_LIMIT_PAUSE_MS = 500;

export function judgeError(err: unknown, breaker: BreakerVerdict, job: JobFacts): ErrorDecision {
  const decided = (verdict: Verdict, outage = false): ErrorDecision => ({ verdict, outage });
  // On its last allowed start a job that is still being sent back gets its final result here,
  // so no row depends on BullMQ's own failure path (and an event that may be lost).
  const sentBack = breaker.kind === 'open' || err instanceof RateLimitedError || err instanceof AuthError;
  if (sentBack && !job.sharedStarts && job.attemptsStarted >= job.maxStarts) {
    const message = `gave up after ${job.attemptsStarted} starts: ${errorMessage(err)}`;
    return decided({ kind: 'fail', err: new CrmSyncError('CRM_RATE_LIMITED', message) });
  }
  if (breaker.kind === 'open') return decided({ kind: 'unreachable', reason: breaker.reason });
  if (err instanceof RateLimitedError) {
    const pauseMs = Math.max(MIN_RATE_LIMIT_PAUSE_MS, err.retryAfterMs ?? DEFAULTS.worker.rateLimitPauseMs);
    return decided({ kind: 'rate-limited', err, pauseMs });
  }
  if (err instanceof AuthError) return decided({ kind: 'blocked', err });
  const outage = err instanceof TransientError;
  const lastAttempt = job.attemptsMade + 1 >= job.attempts;
  if (isPermanent(err) || lastAttempt) return decided({ kind: 'fail', err }, outage);
  return decided({ kind: 'retry', err }, outage);
}

/** A queued row's outcome: a result to store, or what else became of it. */
export type RowOutcome =
  | { kind: 'done'; result: RowResult; settles?: OrderSettlement }
  /** The row's final failure: the caller stamps its result (a clock read). */
  | { kind: 'failed'; err: unknown }
  /**
   * A create that may have made its deal, out of attempts before it could look for it (`err`,
   * the last error): recorded `uncertain`, never `failed`, so `runs retry` looks before it
   * sends (restoring a lost marker) and its export line is refused. The caller stamps it.
   */
  | { kind: 'in-doubt'; err: unknown }
  /** Its result is stored already; `result`: a succeeded create's, stored in the fence's own step. */
  | { kind: 'recorded'; result?: RowResult }
  /** Not now: the row continues after `ms`, without spending an attempt. */
  | { kind: 'wait'; ms: number; lostCreate?: true }
  /** The run was cancelled before the row's request went out (the write fence said so). */
  | { kind: 'cancelled' }
  /** The job is no longer this worker's: nothing more is sent or stored. */
  | { kind: 'lost'; reason: string }
  | Exclude<Verdict, { kind: 'fail' }>;

export interface RowDecision {
  outcome: RowOutcome;
  /** A final status to count; `succeeded` is also an answer the outage watch and breaker hear of. */
  counts?: 'succeeded' | 'failed';
}

export interface RowFacts {
  /** The row creates a deal (a lost answer may have made it). */
  creates: boolean;
  /** The error's verdict, when the send failed. */
  verdict?: Verdict;
  /**
   * A create's marker was there when its final error came back (or it could not be read): the
   * create may have been applied. Read only for a create's final failure; undefined otherwise.
   */
  createInDoubt?: boolean;
  /** How long a create whose answer was lost waits before looking for its deal. */
  settleMs: number;
}

export function decideRow(sent: SendOutcome, facts: RowFacts): RowDecision {
  switch (sent.kind) {
    // (Built key by key, not spread: every row passes here; see row-results.ts on spreads.)
    case 'result': {
      const outcome: Extract<RowOutcome, { kind: 'done' }> = { kind: 'done', result: sent.result };
      if (sent.settles) outcome.settles = sent.settles;
      return counted({ outcome }, sent.result.status);
    }
    case 'recorded': {
      const outcome: Extract<RowOutcome, { kind: 'recorded' }> = { kind: 'recorded' };
      if (sent.result !== undefined) outcome.result = sent.result;
      return counted({ outcome }, sent.status);
    }
    case 'has-result':
      return { outcome: { kind: 'recorded' } };
    case 'wait':
    case 'cancelled':
    case 'lost':
      return { outcome: sent };
    case 'error': {
      const verdict = facts.verdict ?? { kind: 'fail', err: sent.err };
      if (verdict.kind !== 'fail') return { outcome: verdict };
      if (facts.creates) {
        // Only a write's error is maybe-committed (src/crm/errors.ts): this is the POST's own.
        const answerLost = sent.err instanceof TransientError && sent.err.maybeCommitted;
        if (answerLost && facts.createInDoubt !== false) {
          // Out of attempts, but the deal may exist and it has not been looked for yet: the
          // row's marker stays, and after the settle time its next start looks for the deal
          // (only a lookup that finds none sends it again; one that cannot be done ends below).
          return { outcome: { kind: 'wait', ms: facts.settleMs, lostCreate: true } };
        }
        if (answerLost || facts.createInDoubt === true) {
          // Its marker says the create may have been applied (the look-up failed, or was refused,
          // or Redis failed it), or the answer was lost with no marker left to look with:
          // `failed` would invite a re-send (a re-import, or a retry that POSTs blindly once the
          // marker is gone). `uncertain` keeps it from being sent again without a look.
          return { outcome: { kind: 'in-doubt', err: verdict.err } };
        }
      }
      return { outcome: { kind: 'failed', err: verdict.err }, counts: 'failed' };
    }
  }
}

function counted(decision: RowDecision, status: RowResult['status']): RowDecision {
  if (status === 'succeeded' || status === 'failed') decision.counts = status;
  return decision;
}

/** What a failed invite request does to its batch. */
export type InviteStep =
  | { kind: 'retry'; err: unknown }
  | { kind: 'pause'; verdict: PauseVerdict }
  /** Into two halves, as new jobs. */
  | { kind: 'split' }
  | { kind: 'fail'; err: unknown };

export function decideInvites(verdict: Verdict, rows: number): InviteStep {
  if (verdict.kind === 'retry') return verdict;
  if (verdict.kind !== 'fail') return { kind: 'pause', verdict };
  // The API rejects a whole request for one bad address: bisect so every good one still goes in.
  return verdict.err instanceof RejectedError && rows > 1 ? { kind: 'split' } : verdict;
}

/** How a job's loop over its rows ended. */
export interface LoopEnd<R> {
  rows: readonly R[];
  /** Index of the first row not sent. */
  next: number;
  /** Rows of a batch that failed transiently. */
  flaky: R[];
  /** Rows that must wait, and how long. */
  waiting: Array<{ row: R; ms: number }>;
  /** Why the loop stopped early: a pause verdict, or another job's pause seen here. */
  stop: PauseVerdict | { kind: 'paused' } | undefined;
  attemptsStarted: number;
  maxStarts: number;
}

export type JobEnd<R> =
  /** Every row was dealt with: flaky rows retry alone after a backoff, waiting ones are deferred. */
  | { kind: 'complete'; retryAlone: R[]; defer: Array<{ row: R; ms: number }> }
  /** The job's start cap is spent: its unsent rows go on as jobs of their own. */
  | { kind: 'hand-off'; pause?: PauseVerdict; rows: R[] }
  /** The job goes back to wait, holding `keep` (undefined: all its rows) — BullMQ's RateLimitError. */
  | { kind: 'requeue'; pause?: PauseVerdict; keep: R[] | undefined };

export function decideJobEnd<R>(end: LoopEnd<R>): JobEnd<R> {
  const { stop } = end;
  if (!stop) return { kind: 'complete', retryAlone: end.flaky, defer: end.waiting };
  const pause = stop.kind === 'paused' ? {} : { pause: stop };
  // Flaky and waiting rows stay with the job: its next start, after the pause, is their delay.
  const unsent = [...end.flaky, ...end.waiting.map((w) => w.row), ...end.rows.slice(end.next)];
  // The start cap is the job's, shared by its rows: the unsent ones go on with caps of their own.
  if (end.rows.length > 1 && end.attemptsStarted >= end.maxStarts) return { kind: 'hand-off', ...pause, rows: unsent };
  // The job keeps only what it has not sent, so a later start (or an abort) never touches a
  // row that already has its result (a retried row may meanwhile belong to a newer job).
  return { kind: 'requeue', ...pause, keep: unsent.length < end.rows.length ? unsent : undefined };
}
