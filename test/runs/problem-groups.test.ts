import { afterAll, describe, expect, it } from 'vitest';
import {
  RunStore,
  groupProblems,
  normaliseMessage,
  problemGroupOf,
  problemRowsWhere,
  type RowResult,
} from '../../src/runs/index.js';
import { testRedis } from './redis-fixture.js';

const { redis, prefix, cleanup } = testRedis();
const store = new RunStore({ redis, prefix });

afterAll(cleanup);

describe('normaliseMessage', () => {
  it('masks ids, numbers, quoted values and e-mail addresses, keeps the wording', () => {
    expect(normaliseMessage('stage_id: unknown stage stg_unknown_9')).toBe('stage_id: unknown stage #');
    expect(normaliseMessage('deal 48213 not found (HTTP 404)')).toBe('deal # not found (HTTP #)');
    expect(normaliseMessage('value "twelve hundred" is not a number')).toBe('value "…" is not a number');
    expect(normaliseMessage('owner ann.lee@example.com is not a member')).toBe('owner <email> is not a member');
    expect(normaliseMessage('name: is required')).toBe('name: is required');
    // Ids without a digit are still ids; a field name (a colon follows) is not.
    expect(normaliseMessage('stage_id: unknown stage stg_abc')).toBe(
      normaliseMessage('stage_id: unknown stage stg_q7'),
    );
    expect(normaliseMessage('owner_id: no owner usr_xyz')).toBe('owner_id: no owner #');
  });
});

describe('groupProblems (real Redis)', () => {
  it('makes one group of 2,000 rows with one cause, largest first, and leaves succeeded rows out', async () => {
    const run = await store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: 'big.csv',
      columns: ['id', 'name'],
    });
    await store.addQueued(run.id, 2010);
    const at = new Date().toISOString();
    const results: RowResult[] = [];
    for (let row = 1; row <= 2000; row++) {
      results.push({
        row,
        status: 'invalid',
        code: 'VALIDATION',
        message: 'name: is required',
        errors: [{ field: 'name', message: 'is required' }],
        at,
        original: { id: `d${row}`, name: '' },
      });
    }
    for (let row = 2001; row <= 2007; row++) {
      results.push({
        row,
        status: 'failed',
        httpStatus: 422,
        code: 'CRM_REJECTED',
        message: `stage_id: unknown stage stg_${row}`,
        at,
        original: { id: `d${row}`, name: 'x' },
      });
    }
    for (let row = 2008; row <= 2010; row++) results.push({ row, status: 'succeeded', recordId: `d${row}`, at });
    for (let i = 0; i < results.length; i += 500) await store.recordResults(run.id, results.slice(i, i + 500));

    const grouped = await groupProblems(store, run.id);
    expect(grouped).toMatchObject({ scanned: 2007, complete: true, otherRows: 0 });
    expect(grouped.groups.map((g) => [g.status, g.code, g.message, g.count])).toEqual([
      ['invalid', 'VALIDATION', 'name: is required', 2000],
      ['failed', 'CRM_REJECTED', 'stage_id: unknown stage #', 7],
    ]);
    expect(grouped.groups[1]!.rows).toEqual([2001, 2002, 2003, 2004, 2005]);

    const limited = await groupProblems(store, run.id, { scanLimit: 100, maxGroups: 1 });
    expect(limited).toMatchObject({ scanned: 100, complete: false });
    const capped = await groupProblems(store, run.id, { maxGroups: 1 });
    expect(capped.otherRows).toBe(7);

    const failedKey = grouped.groups[1]!.key;
    expect(await problemRowsWhere(store, run.id, (r) => problemGroupOf(r).key === failedKey)).toEqual([
      2001, 2002, 2003, 2004, 2005, 2006, 2007,
    ]);
  });

  it('marks failed groups whose error the worker classes permanent: a retry of them is no remedy', () => {
    const at = new Date().toISOString();
    const of = (status: RowResult['status'], code?: string) =>
      problemGroupOf({ row: 1, status, at, message: 'x', ...(code !== undefined ? { code } : {}) }).permanent;
    expect(of('failed', 'CRM_NOT_FOUND')).toBe(true);
    expect(of('failed', 'CRM_REJECTED')).toBe(true);
    expect(of('failed', 'CRM_BAD_RESPONSE')).toBe(true);
    expect(of('failed', 'CRM_TRANSIENT')).toBe(false);
    expect(of('failed', 'CRM_RATE_LIMITED')).toBe(false);
    expect(of('failed')).toBe(false);
    // Uncertain creates are looked for by a retry; invalid rows have their own words.
    expect(of('uncertain', 'CREATE_UNCERTAIN')).toBe(false);
    expect(of('invalid', 'CRM_REJECTED')).toBe(false);
  });
});
