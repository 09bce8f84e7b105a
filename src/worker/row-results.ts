import { CrmError } from '../crm/index.js';
import { CrmSyncError, errorMessage } from '../errors/index.js';
import { failed, type RowResult } from '../runs/index.js';

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

/** A delay between half and all of `ms` (BullMQ's jitter of 0.5), so retries do not arrive together. */
export function jitter(ms: number): number {
  return Math.round(ms * (0.5 + Math.random() * 0.5));
}
