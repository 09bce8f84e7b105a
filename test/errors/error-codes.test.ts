import { describe, expect, it } from 'vitest';
import { CrmSyncError, ERROR_CODES, USER_ERROR_CODES, isCrmSyncError } from '../../src/errors/index.js';

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
