import { describe, expect, it } from 'vitest';
import { describeError } from '../../src/runs/index.js';

describe('describeError (the crm_sync_error cell)', () => {
  const at = new Date(0).toISOString();
  it('joins the message and field errors', () => {
    expect(
      describeError({
        row: 1,
        status: 'failed',
        message: 'HTTP 422',
        errors: [{ field: 'email', message: 'bad' }],
        at,
      }),
    ).toBe('HTTP 422; email: bad');
  });
  it('says a field error once when the message already carries it', () => {
    const errors = [
      { field: 'Amount (value)', message: 'is not a number' },
      { field: 'name', message: 'is required' },
    ];
    const message = 'Amount (value): is not a number; name: is required';
    expect(describeError({ row: 1, status: 'invalid', message, errors, at })).toBe(message);
  });
});
