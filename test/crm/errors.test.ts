import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  AuthError,
  BadResponseError,
  CrmError,
  NotFoundError,
  RateLimitedError,
  RejectedError,
  TransientError,
  isPermanent,
  isPermanentCode,
  isRetryable,
  parseRetryAfter,
  toCrmError,
  type CrmFailure,
  type CrmRequestContext,
} from '../../src/crm/index.js';
import { isCrmSyncError } from '../../src/errors/index.js';

const NOW = Date.parse('2025-03-01T12:00:00Z');

describe('parseRetryAfter', () => {
  it('reads delta-seconds', () => {
    expect(parseRetryAfter('0', NOW)).toBe(0);
    expect(parseRetryAfter('3', NOW)).toBe(3000);
    expect(parseRetryAfter(' 120 ', NOW)).toBe(120_000);
    expect(parseRetryAfter('1.5', NOW)).toBe(1500);
  });

  it('reads an HTTP-date relative to now', () => {
    expect(parseRetryAfter('Sat, 01 Mar 2025 12:00:30 GMT', NOW)).toBe(30_000);
    expect(parseRetryAfter(new Date(NOW + 2000).toUTCString(), NOW)).toBe(2000);
  });

  it('treats a date in the past as now', () => {
    expect(parseRetryAfter('Sat, 01 Mar 2025 11:00:00 GMT', NOW)).toBe(0);
  });

  it('gives undefined for missing or garbage values', () => {
    expect(parseRetryAfter(undefined, NOW)).toBeUndefined();
    expect(parseRetryAfter('', NOW)).toBeUndefined();
    expect(parseRetryAfter('soon', NOW)).toBeUndefined();
    expect(parseRetryAfter('-5', NOW)).toBeUndefined();
    expect(parseRetryAfter('1e3', NOW)).toBeUndefined();
    expect(parseRetryAfter('Blursday, 99 Foo 2025', NOW)).toBeUndefined();
  });
});

const ctx = (method = 'PATCH'): CrmRequestContext => ({ workspace: 'acme', method, path: '/api/external/v2/deals/d1' });
const answer = (statusCode: number, body: unknown = {}, headers: Record<string, string> = {}): CrmFailure => ({
  kind: 'response',
  statusCode,
  headers,
  body: typeof body === 'string' ? body : JSON.stringify(body),
});
const transport = (code: string, message = `${code} happened`, extra: Record<string, unknown> = {}): CrmFailure => ({
  kind: 'transport',
  error: Object.assign(new Error(message), { code, ...extra }),
});

describe('toCrmError', () => {
  it('401 → AuthError with the service message and context', () => {
    const err = toCrmError(answer(401, { error: 'Could not authenticate, invalid API Key' }), ctx());
    expect(err).toBeInstanceOf(AuthError);
    expect(err).toBeInstanceOf(CrmError);
    expect(isCrmSyncError(err, 'CRM_AUTH')).toBe(true);
    expect(err.status).toBe(401);
    expect(err.serviceMessage).toBe('Could not authenticate, invalid API Key');
    expect(err).toMatchObject({ workspace: 'acme', method: 'PATCH', path: '/api/external/v2/deals/d1' });
    expect(err.message).toContain('Could not authenticate');
    expect(isPermanent(err)).toBe(false);
    expect(isRetryable(err)).toBe(false);
  });

  it('404 → NotFoundError (permanent)', () => {
    const err = toCrmError(answer(404, { error: 'Deal not found' }), ctx());
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err.code).toBe('CRM_NOT_FOUND');
    expect(err.serviceMessage).toBe('Deal not found');
    expect(isPermanent(err)).toBe(true);
  });

  it.each([400, 406, 409, 415, 422])('%i → RejectedError with the service message', (status) => {
    const err = toCrmError(answer(status, { error: "Name can't be blank" }), ctx());
    expect(err).toBeInstanceOf(RejectedError);
    expect(err.code).toBe('CRM_REJECTED');
    expect(err.status).toBe(status);
    expect(err.serviceMessage).toBe("Name can't be blank");
    expect(isPermanent(err)).toBe(true);
    expect(isRetryable(err)).toBe(false);
  });

  it('reads `errors` when there is no `error` string, and tolerates non-JSON bodies', () => {
    expect(toCrmError(answer(422, { errors: { name: ['is required'] } }), ctx()).serviceMessage).toBe(
      '{"name":["is required"]}',
    );
    const html = toCrmError(answer(400, '<html>bad</html>'), ctx());
    expect(html).toBeInstanceOf(RejectedError);
    expect(html.serviceMessage).toBeUndefined();
  });

  it('429 → RateLimitedError with Retry-After in seconds or as a date', () => {
    const secs = toCrmError(answer(429, { error: 'slow down' }, { 'retry-after': '7' }), ctx(), NOW);
    expect(secs).toBeInstanceOf(RateLimitedError);
    expect((secs as RateLimitedError).retryAfterMs).toBe(7000);
    const date = toCrmError(answer(429, {}, { 'retry-after': 'Sat, 01 Mar 2025 12:00:04 GMT' }), ctx(), NOW);
    expect((date as RateLimitedError).retryAfterMs).toBe(4000);
    const none = toCrmError(answer(429, {}), ctx(), NOW);
    expect((none as RateLimitedError).retryAfterMs).toBeUndefined();
    expect(isRetryable(none)).toBe(true);
  });

  it.each([500, 502, 503, 504, 408])('%i → TransientError', (status) => {
    const err = toCrmError(answer(status, 'oops'), ctx());
    expect(err).toBeInstanceOf(TransientError);
    expect(err.code).toBe('CRM_TRANSIENT');
    expect(err.status).toBe(status);
    expect(isRetryable(err)).toBe(true);
    // A 5xx to a write (here PATCH) may come after the service applied it; a 408 never does.
    expect((err as TransientError).maybeCommitted).toBe(status !== 408);
  });

  it('a 5xx on POST may have been applied, on GET nothing was written', () => {
    expect((toCrmError(answer(502), ctx('GET')) as TransientError).maybeCommitted).toBe(false);
    expect((toCrmError(answer(502), ctx('POST')) as TransientError).maybeCommitted).toBe(true);
    expect((toCrmError(answer(408), ctx('POST')) as TransientError).maybeCommitted).toBe(false);
  });

  it.each(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ETIMEDOUT', 'EAI_AGAIN'])(
    'transport %s → TransientError',
    (code) => {
      const err = toCrmError(transport(code), ctx());
      expect(err).toBeInstanceOf(TransientError);
      expect(err.status).toBeUndefined();
      expect(err.message).toContain(code);
      expect((err.cause as { code?: string }).code).toBe(code);
    },
  );

  it('socket hang up (reused keep-alive socket) is transient', () => {
    const err = toCrmError(transport('ECONNRESET', 'socket hang up'), ctx());
    expect(err).toBeInstanceOf(TransientError);
    expect(err.message).toContain('socket hang up');
  });

  it('a transport error on a write carries maybeCommitted unless the request was never sent', () => {
    expect((toCrmError(transport('ECONNRESET'), ctx('POST')) as TransientError).maybeCommitted).toBe(true);
    expect(
      (toCrmError(transport('ETIMEDOUT', 'Timeout', { event: 'request' }), ctx('POST')) as TransientError)
        .maybeCommitted,
    ).toBe(true);
    expect(
      (toCrmError(transport('ETIMEDOUT', 'Timeout', { event: 'connect' }), ctx('POST')) as TransientError)
        .maybeCommitted,
    ).toBe(false);
    expect((toCrmError(transport('ECONNREFUSED'), ctx('POST')) as TransientError).maybeCommitted).toBe(false);
    // An update that may have reached the service counts as possibly applied (write order).
    expect((toCrmError(transport('ECONNRESET'), ctx('PATCH')) as TransientError).maybeCommitted).toBe(true);
    expect((toCrmError(transport('ECONNRESET'), ctx('GET')) as TransientError).maybeCommitted).toBe(false);
  });

  it('invalid 2xx → BadResponseError naming the zod path, never the body', () => {
    const schema = z.object({ deal: z.object({ id: z.string(), name: z.string() }) });
    const result = schema.safeParse({ deal: { id: 42, name: 'SECRET-LOOKING-NAME' } });
    expect(result.success).toBe(false);
    if (result.success) return;
    const err = toCrmError({ kind: 'invalid', statusCode: 200, problem: result.error }, ctx());
    expect(err).toBeInstanceOf(BadResponseError);
    expect(err.code).toBe('CRM_BAD_RESPONSE');
    expect(err.message).toContain('deal.id');
    expect(err.message).not.toContain('42');
    const notJson = toCrmError({ kind: 'invalid', statusCode: 201, problem: 'not-json' }, ctx());
    expect(notJson.message).toContain('not JSON');
    expect(isPermanent(notJson)).toBe(true);
  });

  it('an unexpected redirect is rejected, not followed', () => {
    expect(toCrmError(answer(302), ctx())).toBeInstanceOf(RejectedError);
  });

  it('scrubs the key out of service messages and transport messages', () => {
    const key = 'sk_live_abcdef123456';
    const scrub = (s: string) => s.split(key).join('[redacted]');
    const c = { ...ctx(), scrub };
    const errs = [
      toCrmError(answer(401, { error: `invalid API Key ${key}` }), c),
      toCrmError(transport('ECONNRESET', `reset while sending ${key}`), c),
    ];
    for (const err of errs) {
      expect(inspect(err, { depth: 10 })).not.toContain(key);
      expect(JSON.stringify(err)).not.toContain(key);
      expect(err.stack).not.toContain(key);
      expect(inspect(err)).toContain('[redacted]');
    }
  });

  it("a stored row's code is read as the worker judged its error (the problem groups' Retry goes by it)", () => {
    const answers = [401, 404, 408, 409, 422, 429, 500, 503, 302].map((status) =>
      toCrmError(answer(status, {}), ctx()),
    );
    answers.push(toCrmError({ kind: 'invalid', statusCode: 200, problem: 'not-json' }, ctx()));
    answers.push(
      toCrmError({ kind: 'transport', error: Object.assign(new Error('reset'), { code: 'ECONNRESET' }) }, ctx()),
    );
    for (const err of answers) expect(isPermanentCode(err.code), err.message).toBe(isPermanent(err));
    expect(answers.filter((e) => isPermanentCode(e.code)).map((e) => e.code)).toEqual(
      expect.arrayContaining(['CRM_NOT_FOUND', 'CRM_REJECTED', 'CRM_BAD_RESPONSE']),
    );
    expect(isPermanentCode(undefined)).toBe(false);
    expect(isPermanentCode('ROW_INVALID')).toBe(false);
  });
});
