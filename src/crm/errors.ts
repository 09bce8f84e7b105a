import type { IncomingHttpHeaders } from 'node:http';
import type { z } from 'zod';
import { CrmSyncError, type ErrorCode } from '../errors/index.js';

/**
 * The error taxonomy of the CRM client (docs/architecture.md, "Errors"), shaped
 * after got's source/core/errors.ts: one base class with the request context, one subclass
 * per way the worker must react. Nothing here holds headers, options or the raw got error,
 * because those carry the API key; `cause` is at most a plain Error with code and message.
 */

export type CrmErrorCode = Extract<
  ErrorCode,
  'CRM_AUTH' | 'CRM_RATE_LIMITED' | 'CRM_TRANSIENT' | 'CRM_NOT_FOUND' | 'CRM_REJECTED' | 'CRM_BAD_RESPONSE'
>;

/** Where a request went. `path` is URL path + query only: never headers, never the key. */
export interface CrmRequestContext {
  workspace: string;
  method: string;
  path: string;
  /**
   * Removes secrets from text that came from outside (service messages, socket errors).
   * Default: identity. The client passes one that blanks its API key.
   */
  scrub?: (text: string) => string;
}

export interface CrmErrorInit {
  workspace: string;
  method: string;
  path: string;
  status?: number;
  serviceMessage?: string;
  cause?: unknown;
}

export class CrmError extends CrmSyncError {
  readonly status?: number;
  /** The `error` string of the service's body, when it sent one. */
  readonly serviceMessage?: string;
  readonly method: string;
  readonly path: string;
  readonly workspace: string;

  constructor(code: CrmErrorCode, message: string, init: CrmErrorInit) {
    super(code, message, init.cause === undefined ? undefined : { cause: init.cause });
    if (init.status !== undefined) this.status = init.status;
    if (init.serviceMessage !== undefined) this.serviceMessage = init.serviceMessage;
    this.method = init.method;
    this.path = init.path;
    this.workspace = init.workspace;
  }
}

/** 401: the key is missing, wrong, revoked or belongs to another workspace. Stop the workspace. */
export class AuthError extends CrmError {
  constructor(message: string, init: CrmErrorInit) {
    super('CRM_AUTH', message, init);
  }
}

/**
 * The HTTP status to show for a refused key. Not a setting: an AuthError made without a status
 * (toCrmError always gives one) stands for the CRM's 401.
 */
export function refusedKeyStatus(error: CrmError): number {
  return error.status ?? 401;
}

/** 429: slow down for `retryAfterMs` (undefined when the service did not say). */
export class RateLimitedError extends CrmError {
  readonly retryAfterMs: number | undefined;

  constructor(message: string, init: CrmErrorInit & { retryAfterMs: number | undefined }) {
    super('CRM_RATE_LIMITED', message, init);
    this.retryAfterMs = init.retryAfterMs;
  }
}

/**
 * 5xx, 408, timeouts, resets: may pass on retry. `maybeCommitted` is true when the request
 * was a write (POST, PATCH) that may have reached the service: it might have applied it
 * before the answer was lost. A create must look for its record before creating it again; an
 * update counts as possibly applied when ordering writes to its record.
 */
export class TransientError extends CrmError {
  readonly maybeCommitted: boolean;
  /**
   * Set when the request provably never reached a service (connection refused, DNS, no
   * route, a connect timeout, a certificate the client refused): the transport code, e.g.
   * `ECONNREFUSED`. A streak of these means the CRM is unreachable, not that a row is bad.
   */
  readonly unreachable: string | undefined;

  constructor(message: string, init: CrmErrorInit & { maybeCommitted: boolean; unreachable?: string | undefined }) {
    super('CRM_TRANSIENT', message, init);
    this.maybeCommitted = init.maybeCommitted;
    this.unreachable = init.unreachable;
  }
}

/** 404: the record id does not exist. Permanent for that row. */
export class NotFoundError extends CrmError {
  constructor(message: string, init: CrmErrorInit) {
    super('CRM_NOT_FOUND', message, init);
  }
}

/** Any other 4xx (400/406/409/415/422, …) and unexpected redirects. Permanent for that row. */
export class RejectedError extends CrmError {
  constructor(message: string, init: CrmErrorInit) {
    super('CRM_REJECTED', message, init);
  }
}

/**
 * A 2xx whose body is not JSON or does not match the schema. The write was applied all the
 * same; `recordId` is the record's id when the body still names one, so a caller can record
 * the row as done instead of failing it (and a retry would create a deal twice).
 */
export class BadResponseError extends CrmError {
  readonly recordId: string | undefined;
  /**
   * An update's answer that names another record than the one at its path (CrmClient.update):
   * the id it named. `recordId` is then unset — the row is never recorded under it.
   */
  readonly answeredId: string | undefined;

  constructor(message: string, init: CrmErrorInit & { recordId?: string | undefined; answeredId?: string }) {
    super('CRM_BAD_RESPONSE', message, init);
    this.recordId = init.recordId;
    this.answeredId = init.answeredId;
  }
}

/**
 * Codes of the failures that are final for a row (NotFoundError, RejectedError, BadResponseError):
 * the same request gets the same answer, so a stored row with one fails again unless it is changed.
 * By code, so a stored result (which keeps only its code) is judged as the worker judged its error.
 */
const PERMANENT_CODES: ReadonlySet<string> = new Set<CrmErrorCode>([
  'CRM_NOT_FOUND',
  'CRM_REJECTED',
  'CRM_BAD_RESPONSE',
]);

/** A stored row's error code is one the worker does not retry: sending the row unchanged fails again. */
export function isPermanentCode(code: string | undefined): boolean {
  return code !== undefined && PERMANENT_CODES.has(code);
}

/** The row failed for good: retrying the same request gives the same answer. */
export function isPermanent(err: unknown): boolean {
  return err instanceof CrmError && isPermanentCode(err.code);
}

/** Worth trying again later (after Retry-After or a backoff). AuthError is neither: it stops the workspace. */
export function isRetryable(err: unknown): boolean {
  return err instanceof RateLimitedError || err instanceof TransientError;
}

/**
 * `Retry-After` in ms: delta-seconds or an HTTP-date (RFC 9110 §10.2.3). A date in the past
 * means "now" (0). Anything unreadable gives undefined so the caller picks its own default.
 */
export function parseRetryAfter(header: string | undefined, now: number = Date.now()): number | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  if (value === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  // A bare number-like string that failed above (e.g. "-5", "1e3") is not a date either.
  if (!/[a-z]/i.test(value)) return undefined;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/** What the client saw: an HTTP answer, a failure to get one, or a 2xx it could not read. */
export type CrmFailure =
  | { kind: 'response'; statusCode: number; headers: IncomingHttpHeaders; body: string }
  | { kind: 'transport'; error: unknown }
  | { kind: 'invalid'; statusCode: number; problem: 'not-json' | z.ZodError; recordId?: string | undefined };

/** Codes for which the request provably never reached the service (nothing can have been applied). */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN']);
const NOT_SENT_TIMEOUT_EVENTS = new Set(['lookup', 'connect', 'secureConnect']);
/** TLS refusals by the client: the request was never sent (a wrong host, or a proxy in the way). */
const TLS_REFUSED =
  /^(CERT_|ERR_TLS_CERT|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_(GET|VERIFY)_)/;
const MAX_SERVICE_MESSAGE = 500;

/**
 * The one place where an answer or a transport error becomes a CrmError. Call sites never
 * look at status codes themselves.
 */
export function toCrmError(failure: CrmFailure, ctx: CrmRequestContext, now: number = Date.now()): CrmError {
  const scrub = ctx.scrub ?? ((s: string) => s);
  const base = { workspace: ctx.workspace, method: ctx.method, path: ctx.path };
  const where = `${ctx.method} ${ctx.path} (workspace ${ctx.workspace})`;

  if (failure.kind === 'transport') {
    const { code, message, event } = describeTransport(failure.error);
    const cleanMessage = scrub(message);
    const tlsRefused = code !== undefined && TLS_REFUSED.test(code);
    const timedOutBeforeSending = event !== undefined && NOT_SENT_TIMEOUT_EVENTS.has(event);
    const notSent = (code !== undefined && NOT_SENT_CODES.has(code)) || timedOutBeforeSending || tlsRefused;
    const maybeCommitted = isWrite(ctx.method) && !notSent;
    const cause = Object.assign(new Error(cleanMessage), { code });
    const unreachable = notSent ? (timedOutBeforeSending ? `${event} timeout` : (code ?? 'network error')) : undefined;
    return new TransientError(
      `${where} failed: ${code ?? 'network error'}: ${cleanMessage}${maybeCommitted ? ' (the service may have applied it)' : ''}`,
      {
        ...base,
        cause,
        maybeCommitted,
        unreachable,
      },
    );
  }

  if (failure.kind === 'invalid') {
    const detail = failure.problem === 'not-json' ? 'the body is not JSON' : describeZodError(failure.problem);
    return new BadResponseError(`${where}: unexpected ${failure.statusCode} answer: ${detail}`, {
      ...base,
      status: failure.statusCode,
      recordId: failure.recordId,
    });
  }

  const status = failure.statusCode;
  const rawMessage = serviceMessageOf(failure.body);
  const serviceMessage = rawMessage === undefined ? undefined : scrub(rawMessage);
  const init: CrmErrorInit = { ...base, status, ...(serviceMessage === undefined ? {} : { serviceMessage }) };
  const said = serviceMessage === undefined ? '' : `: ${serviceMessage}`;
  const message = `${where} → ${status}${said}`;

  if (status === 401) return new AuthError(message, init);
  if (status === 404) return new NotFoundError(message, init);
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(headerValue(failure.headers['retry-after']), now);
    return new RateLimitedError(message, { ...init, retryAfterMs });
  }
  if (status === 408) return new TransientError(message, { ...init, maybeCommitted: false });
  // A 5xx on a write may come after the service applied it (gateway timeout, crash after commit).
  if (status >= 500) return new TransientError(message, { ...init, maybeCommitted: isWrite(ctx.method) });
  if (status >= 300 && status < 400) {
    return new RejectedError(`${message} (unexpected redirect: check the workspace base URL)`, init);
  }
  if (status >= 200 && status < 300) {
    return new BadResponseError(`${where}: unexpected success status ${status}`, init);
  }
  return new RejectedError(message, init);
}

function isWrite(method: string): boolean {
  const m = method.toUpperCase();
  return m !== 'GET' && m !== 'HEAD';
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function describeTransport(error: unknown): { code?: string; message: string; event?: string } {
  if (typeof error !== 'object' || error === null) return { message: String(error) };
  const e = error as { code?: unknown; message?: unknown; event?: unknown; name?: unknown };
  const out: { code?: string; message: string; event?: string } = {
    message: typeof e.message === 'string' ? e.message : String(error),
  };
  if (typeof e.code === 'string') out.code = e.code;
  if (typeof e.event === 'string') out.event = e.event;
  return out;
}

/** The `error` string of `{error}`; also `message` / `errors` since the spec shows only 401. */
function serviceMessageOf(body: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const o = parsed as Record<string, unknown>;
  let text: string | undefined;
  if (typeof o.error === 'string') text = o.error;
  else if (typeof o.message === 'string') text = o.message;
  else if (o.errors !== undefined) text = typeof o.errors === 'string' ? o.errors : JSON.stringify(o.errors);
  if (text === undefined) return undefined;
  return text.length > MAX_SERVICE_MESSAGE ? `${text.slice(0, MAX_SERVICE_MESSAGE)}…` : text;
}

/** Names the failing paths and expectations, never the received values (they are service data). */
function describeZodError(err: z.ZodError): string {
  const parts = err.issues.slice(0, 5).map((issue) => {
    const path = issue.path.length === 0 ? '(root)' : issue.path.map(String).join('.');
    return `${path}: ${issue.message}`;
  });
  const more = err.issues.length > 5 ? ` (+${err.issues.length - 5} more)` : '';
  return `does not match the schema: ${parts.join('; ')}${more}`;
}
