import { describe, expect, it } from 'vitest';
import {
  CrmSyncError,
  ERRORS,
  ERROR_CODES,
  EXIT,
  USER_ERROR_CODES,
  errorEntry,
  isCrmSyncError,
  type ErrorCode,
} from '../../src/errors/index.js';

describe('error code registry', () => {
  it('has unique, upper-snake codes that equal their keys', () => {
    const codes = Object.keys(ERROR_CODES);
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^[A-Z][A-Z0-9_]+$/);
    const descriptions = Object.values(ERROR_CODES);
    expect(new Set(descriptions).size).toBe(descriptions.length);
  });

  it('builds errors with name, code and cause', () => {
    const cause = new Error('low level');
    const err = new CrmSyncError('RUN_NOT_FOUND', 'no run r1', { cause });
    expect(err.name).toBe('CrmSyncError');
    expect(err.code).toBe('RUN_NOT_FOUND');
    expect(err.cause).toBe(cause);
    expect(isCrmSyncError(err, 'RUN_NOT_FOUND')).toBe(true);
    expect(isCrmSyncError(err, 'USAGE')).toBe(false);
    expect(isCrmSyncError(new Error('x'))).toBe(false);
  });
});

describe('user error codes', () => {
  it('are all registered codes', () => {
    for (const code of USER_ERROR_CODES) expect(Object.keys(ERROR_CODES)).toContain(code);
  });
});

describe("each code's entry", () => {
  const exits = new Set<number>(Object.values(EXIT));

  it('holds its meaning, one of the exit codes and an HTTP error status', () => {
    for (const [code, entry] of Object.entries(ERRORS)) {
      expect(entry.message, code).toBe(ERROR_CODES[code as ErrorCode]);
      expect(exits.has(entry.exit), `${code}: exit ${entry.exit}`).toBe(true);
      expect(entry.exit, code).not.toBe(EXIT.OK);
      expect(entry.http, code).toBeGreaterThanOrEqual(400);
      expect(entry.http, code).toBeLessThan(600);
    }
  });

  it('keeps the exit codes and statuses the CLI and the dashboard gave before the registry held them', () => {
    const exitOf = (code: ErrorCode) => errorEntry(code).exit;
    expect(exitOf('USAGE')).toBe(EXIT.USAGE);
    expect(exitOf('APPROVAL_REQUIRED')).toBe(EXIT.USAGE);
    expect(exitOf('REDIS_EVICTS')).toBe(EXIT.USAGE);
    expect(exitOf('CRM_AUTH')).toBe(EXIT.BLOCKED);
    expect(exitOf('REDIS_LOST')).toBe(EXIT.REDIS_LOST);
    expect(exitOf('REDIS_FULL')).toBe(EXIT.REDIS_LOST);
    expect(exitOf('REDIS_DATA_LOST')).toBe(EXIT.REDIS_DATA_LOST);
    expect(exitOf('CRM_BAD_RESPONSE')).toBe(EXIT.CRM_BAD_ANSWER);
    expect(exitOf('REDIS_UNAVAILABLE')).toBe(EXIT.INTERNAL);
    expect(exitOf('CRM_TRANSIENT')).toBe(EXIT.INTERNAL);
    const httpOf = (code: ErrorCode) => errorEntry(code).http;
    expect(httpOf('USAGE')).toBe(400);
    expect(httpOf('INPUT_PARSE')).toBe(400);
    expect(httpOf('RUN_NOT_FOUND')).toBe(404);
    expect(httpOf('WORKSPACE_UNKNOWN')).toBe(404);
    expect(httpOf('RUN_STATE')).toBe(409);
    expect(httpOf('APPROVAL_REQUIRED')).toBe(409);
    expect(httpOf('INPUT_TOO_LARGE')).toBe(413);
    expect(httpOf('DASHBOARD_BUSY')).toBe(503);
    expect(httpOf('REDIS_UNAVAILABLE')).toBe(503);
    expect(httpOf('CLIENT_GONE')).toBe(499);
    expect(httpOf('CRM_AUTH')).toBe(500);
  });

  it("gives an error thrown without a message of its own the code's meaning", () => {
    expect(new CrmSyncError('CLIENT_GONE').message).toBe(ERROR_CODES.CLIENT_GONE);
  });
});
