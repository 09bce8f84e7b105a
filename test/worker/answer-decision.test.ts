import { describe, expect, it } from 'vitest';
import {
  AuthError,
  BadResponseError,
  NotFoundError,
  RateLimitedError,
  RejectedError,
  TransientError,
} from '../../src/crm/index.js';
import { CrmSyncError } from '../../src/errors/index.js';
import { failed, succeeded, superseded, uncertain, type RowResult } from '../../src/runs/index.js';
import {
  decideInvites,
  decideJobEnd,
  decideRow,
  judgeError,
  requestStatus,
  type JobFacts,
  type LoopEnd,
  type PauseVerdict,
  type Verdict,
} from '../../src/worker/answer-decision.js';
import type { BreakerVerdict } from '../../src/worker/circuit-breaker.js';
import type { SendOutcome } from '../../src/worker/row-sender.js';

/*
 * The worker's decisions on CRM answers (src/worker/answer-decision.ts), one table per
 * decision: every branch is a row, with no Redis, no HTTP and no clock.
 */

const at = { workspace: 'ws', method: 'POST', path: '/deals' };
const e = {
  r429: (retryAfterMs?: number) => new RateLimitedError('429', { ...at, status: 429, retryAfterMs }),
  r401: () => new AuthError('401', { ...at, status: 401 }),
  r503: (maybeCommitted = false) => new TransientError('503', { ...at, status: 503, maybeCommitted }),
  reset: (maybeCommitted = true) => new TransientError('reset', { ...at, maybeCommitted }),
  r422: () => new RejectedError('422', { ...at, status: 422 }),
  r404: () => new NotFoundError('404', { ...at, status: 404 }),
  badBody: () => new BadResponseError('bad body', { ...at, status: 200 }),
  plain: () => new Error('socket hang up'),
};
const pass: BreakerVerdict = { kind: 'pass' };
const open: BreakerVerdict = { kind: 'open', reason: 'ECONNREFUSED streak' };
/** A job of one row on its second of three attempts, far from the start cap. */
const job: JobFacts = { attemptsStarted: 2, maxStarts: 100, attemptsMade: 1, attempts: 3, sharedStarts: false };
const capped: JobFacts = { ...job, attemptsStarted: 100 };
const lastAttempt: JobFacts = { ...job, attemptsMade: 2 };

describe('requestStatus', () => {
  it.each([
    ['a CRM answer with a status', e.r503(), '503'],
    ['a 429', e.r429(), '429'],
    ['a CRM error without a status (no answer came)', e.reset(), 'network'],
    ['an error that is not the CRM client’s', e.plain(), 'network'],
  ])('%s → %s', (_, err, status) => {
    expect(requestStatus(err)).toBe(status);
  });
});

describe('judgeError', () => {
  it.each<[string, unknown, BreakerVerdict, JobFacts, Verdict['kind'], boolean]>([
    // [case, error, breaker, job, verdict, outage]
    ['429 with starts left', e.r429(2000), pass, job, 'rate-limited', false],
    ['401', e.r401(), pass, job, 'blocked', false],
    ['open breaker', e.reset(false), open, job, 'unreachable', false],
    ['open breaker wins over a 429', e.r429(), open, job, 'unreachable', false],
    ['429 at the start cap', e.r429(), pass, capped, 'fail', false],
    ['401 at the start cap', e.r401(), pass, capped, 'fail', false],
    ['open breaker at the start cap', e.reset(false), open, capped, 'fail', false],
    ['429 at the start cap of a shared job', e.r429(), pass, { ...capped, sharedStarts: true }, 'rate-limited', false],
    [
      'open breaker at the start cap of a shared job',
      e.reset(),
      open,
      { ...capped, sharedStarts: true },
      'unreachable',
      false,
    ],
    ['503 with attempts left', e.r503(), pass, job, 'retry', true],
    ['503 on the last attempt', e.r503(), pass, lastAttempt, 'fail', true],
    ['503 at the start cap (not sent back: the cap is not its to spend)', e.r503(), pass, capped, 'retry', true],
    ['a lost answer with attempts left', e.reset(), pass, job, 'retry', true],
    ['422 (permanent)', e.r422(), pass, job, 'fail', false],
    ['404 (permanent)', e.r404(), pass, job, 'fail', false],
    ['a 2xx off the spec (permanent)', e.badBody(), pass, job, 'fail', false],
    ['a non-CRM error with attempts left', e.plain(), pass, job, 'retry', false],
    ['a non-CRM error on the last attempt', e.plain(), pass, lastAttempt, 'fail', false],
    [
      'a job with no attempts option (one attempt)',
      e.r503(),
      pass,
      { ...job, attemptsMade: 0, attempts: 1 },
      'fail',
      true,
    ],
  ])('%s → %s', (_, err, breaker, facts, kind, outage) => {
    const decided = judgeError(err, breaker, facts);
    expect(decided.verdict.kind).toBe(kind);
    expect(decided.outage).toBe(outage);
  });

  it('keeps the error itself for retry, fail and pause verdicts', () => {
    const err = e.r422();
    expect(judgeError(err, pass, job).verdict).toEqual({ kind: 'fail', err });
    const flaky = e.r503();
    expect(judgeError(flaky, pass, job).verdict).toEqual({ kind: 'retry', err: flaky });
    const auth = e.r401();
    expect(judgeError(auth, pass, job).verdict).toEqual({ kind: 'blocked', err: auth });
    expect(judgeError(e.reset(), open, job).verdict).toEqual({ kind: 'unreachable', reason: 'ECONNREFUSED streak' });
  });

  it('gives up at the start cap with CRM_RATE_LIMITED, naming the starts and the cause', () => {
    const { verdict } = judgeError(e.r429(), pass, capped);
    expect(verdict.kind).toBe('fail');
    const err = (verdict as { err: unknown }).err;
    expect(err).toBeInstanceOf(CrmSyncError);
    expect((err as CrmSyncError).code).toBe('CRM_RATE_LIMITED');
    expect((err as Error).message).toMatch(/^gave up after 100 starts: /);
  });

  it.each([
    ['Retry-After 5 s', 5000, 5000],
    ['Retry-After 0 (floored: no tight requeue loop)', 0, 500],
    ['Retry-After under the floor', 120, 500],
    ['no Retry-After', undefined, 1000],
  ])('429 with %s pauses %i ms', (_, retryAfterMs, pauseMs) => {
    expect(judgeError(e.r429(retryAfterMs), pass, job).verdict).toMatchObject({ kind: 'rate-limited', pauseMs });
  });
});

describe('decideRow', () => {
  const place = { row: 3, line: 4 };
  const original = { name: 'x' };
  const settles = { key: 'order-key', seq: '0001', applied: true, windowMs: 1000 };
  const ok = succeeded(place, 'd1');
  const bad = failed(place, { message: 'no' }, original);
  const over = superseded(place, 'later rows wrote it');
  const doubt = uncertain(place, 'CREATE_UNCERTAIN', 'maybe', original);
  const facts: { creates: boolean; settleMs: number; createInDoubt?: boolean } = { creates: false, settleMs: 30_000 };
  const rateLimited: Verdict = { kind: 'rate-limited', err: e.r429(), pauseMs: 1000 };

  it.each<[string, SendOutcome, Partial<typeof facts> & { verdict?: Verdict }, object, string | undefined]>([
    // [case, what the send came to, facts, outcome, counts]
    ['a success', { kind: 'result', result: ok }, {}, { kind: 'done', result: ok }, 'succeeded'],
    [
      'an applied update settling its order',
      { kind: 'result', result: ok, settles },
      {},
      { kind: 'done', result: ok, settles },
      'succeeded',
    ],
    ['a failed result', { kind: 'result', result: bad }, {}, { kind: 'done', result: bad }, 'failed'],
    ['a superseded row (not counted)', { kind: 'result', result: over }, {}, { kind: 'done', result: over }, undefined],
    [
      'an uncertain create (not counted)',
      { kind: 'result', result: doubt },
      {},
      { kind: 'done', result: doubt },
      undefined,
    ],
    ['a create stored with its deal', { kind: 'recorded', status: 'succeeded' }, {}, { kind: 'recorded' }, 'succeeded'],
    ['a create stored as failed', { kind: 'recorded', status: 'failed' }, {}, { kind: 'recorded' }, 'failed'],
    ['a create stored uncertain', { kind: 'recorded', status: 'uncertain' }, {}, { kind: 'recorded' }, undefined],
    ['a row that had its result', { kind: 'has-result' }, {}, { kind: 'recorded' }, undefined],
    ['a wait (defer)', { kind: 'wait', ms: 250 }, {}, { kind: 'wait', ms: 250 }, undefined],
    ['a cancel seen by the fence', { kind: 'cancelled' }, {}, { kind: 'cancelled' }, undefined],
    ['a lost job', { kind: 'lost', reason: 'lock gone' }, {}, { kind: 'lost', reason: 'lock gone' }, undefined],
    [
      'an error to retry',
      { kind: 'error', err: 'x' },
      { verdict: { kind: 'retry', err: 'x' } },
      { kind: 'retry', err: 'x' },
      undefined,
    ],
    ['an error that pauses (429)', { kind: 'error', err: 'x' }, { verdict: rateLimited }, rateLimited, undefined],
    [
      'an error that blocks (401)',
      { kind: 'error', err: 'x' },
      { verdict: { kind: 'blocked', err: e.r401() } },
      { kind: 'blocked' },
      undefined,
    ],
    [
      'an error while the breaker holds the workspace',
      { kind: 'error', err: 'x' },
      { verdict: { kind: 'unreachable', reason: 'r' } },
      { kind: 'unreachable', reason: 'r' },
      undefined,
    ],
    [
      'a final failure of an update',
      { kind: 'error', err: 'x' },
      { verdict: { kind: 'fail', err: 'y' } },
      { kind: 'failed', err: 'y' },
      'failed',
    ],
    ['a final failure without a verdict', { kind: 'error', err: 'x' }, {}, { kind: 'failed', err: 'x' }, 'failed'],
    [
      'a create whose last answer was lost (uncertain: looks for its deal after the settle time)',
      { kind: 'error', err: e.reset(true) },
      { creates: true, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'wait', ms: 30_000, lostCreate: true },
      undefined,
    ],
    [
      'a create whose last answer was lost, its marker there (looks for its deal after the settle time)',
      { kind: 'error', err: e.reset(true) },
      { creates: true, createInDoubt: true, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'wait', ms: 30_000, lostCreate: true },
      undefined,
    ],
    [
      'a create whose last answer was lost with no marker left to look with (uncertain, not failed)',
      { kind: 'error', err: e.r503(true) },
      { creates: true, createInDoubt: false, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'in-doubt', err: 'y' },
      undefined,
    ],
    [
      "a create in doubt whose look-up's list read failed on the last attempt (uncertain, not failed)",
      { kind: 'error', err: e.r503(false) },
      { creates: true, createInDoubt: true, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'in-doubt', err: 'y' },
      undefined,
    ],
    [
      "a create in doubt whose look-up's list read timed out on the last attempt",
      { kind: 'error', err: e.reset(false) },
      { creates: true, createInDoubt: true, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'in-doubt', err: 'y' },
      undefined,
    ],
    [
      'a create in doubt whose look-up hit Redis errors on the last attempt',
      { kind: 'error', err: e.plain() },
      { creates: true, createInDoubt: true, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'in-doubt', err: 'y' },
      undefined,
    ],
    [
      'a create in doubt whose look-up got an off-spec list page (permanent, any attempt)',
      { kind: 'error', err: e.badBody() },
      { creates: true, createInDoubt: true, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'in-doubt', err: 'y' },
      undefined,
    ],
    [
      'a create in doubt that gave up at the start cap (429s during its look-up)',
      { kind: 'error', err: e.r429() },
      { creates: true, createInDoubt: true, verdict: { kind: 'fail', err: 'gave up after 100 starts' } },
      { kind: 'in-doubt', err: 'gave up after 100 starts' },
      undefined,
    ],
    [
      'a create in doubt whose look-up failed, with attempts left (retries)',
      { kind: 'error', err: e.r503(false) },
      { creates: true, createInDoubt: true, verdict: { kind: 'retry', err: 'y' } },
      { kind: 'retry', err: 'y' },
      undefined,
    ],
    [
      'a create without a marker whose last request surely did not commit',
      { kind: 'error', err: e.r503(false) },
      { creates: true, createInDoubt: false, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'failed', err: 'y' },
      'failed',
    ],
    [
      'a create without a marker rejected for good',
      { kind: 'error', err: e.r422() },
      { creates: true, createInDoubt: false, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'failed', err: 'y' },
      'failed',
    ],
    [
      'a create whose last request surely did not commit',
      { kind: 'error', err: e.r503(false) },
      { creates: true, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'failed', err: 'y' },
      'failed',
    ],
    [
      'a create rejected for good',
      { kind: 'error', err: e.r422() },
      { creates: true, verdict: { kind: 'fail', err: 'y' } },
      { kind: 'failed', err: 'y' },
      'failed',
    ],
    [
      'an update whose last answer was lost (fails: its order settles on the fence)',
      { kind: 'error', err: e.reset(true) },
      { verdict: { kind: 'fail', err: 'y' } },
      { kind: 'failed', err: 'y' },
      'failed',
    ],
  ])('%s', (_, sent, more, outcome, counts) => {
    const decided = decideRow(sent, { ...facts, ...more });
    expect(decided.outcome).toMatchObject(outcome);
    expect(decided.counts).toBe(counts);
  });

  it('passes the row result through as it is (no copy stamped anew)', () => {
    const result: RowResult = ok;
    const decided = decideRow({ kind: 'result', result }, facts);
    expect(decided.outcome.kind === 'done' && decided.outcome.result).toBe(result);
  });

  it('waits for a create the settle time it is given', () => {
    const sent: SendOutcome = { kind: 'error', err: e.reset(true) };
    const decided = decideRow(sent, { creates: true, settleMs: 1234, verdict: { kind: 'fail', err: 'y' } });
    expect(decided.outcome).toEqual({ kind: 'wait', ms: 1234, lostCreate: true });
  });
});

describe('decideInvites', () => {
  const pauses: PauseVerdict[] = [
    { kind: 'rate-limited', err: e.r429(), pauseMs: 1000 },
    { kind: 'blocked', err: e.r401() },
    { kind: 'unreachable', reason: 'r' },
  ];
  it.each<[string, Verdict, number, object]>([
    ['a retry', { kind: 'retry', err: 'x' }, 3, { kind: 'retry', err: 'x' }],
    ...pauses.map((v): [string, Verdict, number, object] => [
      `a pause (${v.kind})`,
      v,
      3,
      { kind: 'pause', verdict: v },
    ]),
    ['a rejected batch of several (bisect)', { kind: 'fail', err: e.r422() }, 2, { kind: 'split' }],
    ['a rejected batch of one (its address is the bad one)', { kind: 'fail', err: e.r422() }, 1, { kind: 'fail' }],
    ['another final failure of a batch', { kind: 'fail', err: e.r404() }, 5, { kind: 'fail' }],
    [
      'a give-up at the start cap',
      { kind: 'fail', err: new CrmSyncError('CRM_RATE_LIMITED', 'x') },
      5,
      { kind: 'fail' },
    ],
  ])('%s', (_, verdict, rows, step) => {
    expect(decideInvites(verdict, rows)).toMatchObject(step);
  });
});

describe('decideJobEnd', () => {
  const rows = ['a', 'b', 'c', 'd'];
  const end = (over: Partial<LoopEnd<string>>): LoopEnd<string> => ({
    rows,
    next: rows.length,
    flaky: [],
    waiting: [],
    stop: undefined,
    attemptsStarted: 1,
    maxStarts: 100,
    ...over,
  });
  const rateLimited: PauseVerdict = { kind: 'rate-limited', err: e.r429(), pauseMs: 1000 };

  it.each<[string, LoopEnd<string>, object]>([
    ['all rows sent', end({}), { kind: 'complete', retryAlone: [], defer: [] }],
    [
      'flaky rows retry alone, waiting rows are deferred',
      end({ flaky: ['b'], waiting: [{ row: 'c', ms: 5 }] }),
      { kind: 'complete', retryAlone: ['b'], defer: [{ row: 'c', ms: 5 }] },
    ],
    [
      'a 429 after two rows: the job keeps its unsent rows and pauses',
      end({ next: 2, stop: rateLimited }),
      { kind: 'requeue', pause: rateLimited, keep: ['c', 'd'] },
    ],
    [
      'another job’s pause seen: no pause of its own',
      end({ next: 3, stop: { kind: 'paused' } }),
      { kind: 'requeue', keep: ['d'] },
    ],
    [
      'flaky and waiting rows stay with the paused job, ahead of the unsent',
      end({ next: 3, flaky: ['a'], waiting: [{ row: 'b', ms: 5 }], stop: rateLimited }),
      { kind: 'requeue', pause: rateLimited, keep: ['a', 'b', 'd'] },
    ],
    [
      'a 429 on the first row: the job keeps its data as it is',
      end({ next: 0, stop: rateLimited }),
      { kind: 'requeue', pause: rateLimited, keep: undefined },
    ],
    [
      'a batch at the start cap hands its unsent rows off',
      end({ next: 1, stop: rateLimited, attemptsStarted: 100 }),
      { kind: 'hand-off', pause: rateLimited, rows: ['b', 'c', 'd'] },
    ],
    [
      'a job of one row is requeued even at the start cap (judgeError fails a lone row there)',
      end({ rows: ['a'], next: 0, stop: rateLimited, attemptsStarted: 100 }),
      { kind: 'requeue', pause: rateLimited, keep: undefined },
    ],
  ])('%s', (_, loop, decided) => {
    expect(decideJobEnd(loop)).toEqual(decided);
  });
});
