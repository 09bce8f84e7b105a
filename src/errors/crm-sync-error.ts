import { errorEntry, type ErrorCode } from './error-codes.js';

/**
 * Base of every error crm-sync throws on purpose. `code` is stable and machine-readable;
 * `message` is for people and must never contain a secret (callers pass only redacted context);
 * without one, the code's own meaning from the registry is the message.
 */
export class CrmSyncError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? errorEntry(code).message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** True for any value that is a CrmSyncError with the given code (or any code when omitted). */
export function isCrmSyncError(value: unknown, code?: ErrorCode): value is CrmSyncError {
  return value instanceof CrmSyncError && (code === undefined || value.code === code);
}

/** A one-line message for any thrown value, for logs and result rows. */
export function errorMessage(value: unknown): string {
  if (value instanceof Error) return value.message;
  return String(value);
}
