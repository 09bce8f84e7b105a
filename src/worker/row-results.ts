import { CrmError, type BadResponseError } from '../crm/index.js';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import { failed, uncertain, type RowResult } from '../runs/index.js';

export function now(): string {
  return new Date().toISOString();
}

/** A row's final failure: the CRM's status and message when it answered, else the error's. */
export function failureResult(
  base: { row: number; line: number; ref?: string | undefined },
  err: unknown,
  original: Record<string, string>,
): RowResult {
  const crm = err instanceof CrmError ? err : undefined;
  return failed(
    base,
    {
      httpStatus: crm?.status,
      code: err instanceof CrmSyncError ? err.code : 'CRM_TRANSIENT',
      message: crm?.serviceMessage ?? errorMessage(err),
    },
    original,
  );
}

/**
 * A create that may have made its deal (its marker is set) and ran out of attempts before it
 * could look for it: `uncertain`, naming the error, never `failed` (which an operator would
 * import again, and `runs retry` would send without a look once the marker expired).
 */
export function inDoubtResult(
  base: { row: number; line: number; ref?: string | undefined },
  err: unknown,
  original: Record<string, string>,
): RowResult {
  return uncertain(
    base,
    'CREATE_UNCERTAIN',
    `may have been created: it was sent, and its look-up for its deal could not be done before its attempts ran out (${errorMessage(err)}); ` +
      'not sent again: `runs retry` looks again before sending anything (do not import this row again)',
    original,
  );
}

/**
 * An update answered 2xx for another record than the one at its path (or for none): the write
 * may have happened, so `uncertain`, with both ids in its message — never recorded under the
 * answer's id. `runs retry` sends it again (an update is safe to repeat).
 */
export function updateInDoubt(
  base: { row: number; line: number; ref?: string | undefined },
  recordId: string,
  err: BadResponseError,
  original: Record<string, string>,
): RowResult {
  const answered =
    err.answeredId !== undefined
      ? `the CRM answered with record ${JSON.stringify(err.answeredId)} for the write to record ${JSON.stringify(recordId)}`
      : `the CRM's answer to the write to record ${JSON.stringify(recordId)} does not name it (${errorMessage(err)})`;
  return uncertain(
    base,
    err.code,
    `may have been applied: ${answered}, a fault of the CRM; not recorded under the answer's id (check record ${JSON.stringify(recordId)}; \`runs retry\` sends it again)`,
    original,
  );
}

/** A delay between half and all of `ms` (BullMQ's jitter of 0.5), so retries do not arrive together. */
export function jitter(ms: number): number {
  return Math.round(ms * (0.5 + Math.random() * 0.5));
}
