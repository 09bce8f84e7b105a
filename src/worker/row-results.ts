import { CrmError } from '../crm/index.js';
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

/** A delay between half and all of `ms` (BullMQ's jitter of 0.5), so retries do not arrive together. */
export function jitter(ms: number): number {
  return Math.round(ms * (0.5 + Math.random() * 0.5));
}
