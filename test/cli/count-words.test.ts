import { describe, expect, it } from 'vitest';
import { predictionWords } from '../../src/cli/plan-words.js';
import { retriedWords } from '../../src/cli/runs-actions.js';
import type { PlanRecord } from '../../src/plans/index.js';
import { placeWords } from '../../src/runs/index.js';

/** Counts a person reads must add up and be grammatical (issue 46, item 2). */
describe('count words', () => {
  it('runs retry says how many were queued, not how many were read', () => {
    expect(retriedWords({ read: 11, queued: 5, invalid: 6 })).toBe(
      '11 rows read again: 5 queued, 6 still invalid (not sent)',
    );
    expect(retriedWords({ read: 1, queued: 1, invalid: 0 })).toBe('1 row read again: 1 queued');
    expect(retriedWords({ read: 4, queued: 1, invalid: 1 })).toBe(
      '4 rows read again: 1 queued, 1 still invalid (not sent), 2 not queued',
    );
  });

  it('a plan of one write and one list page says so in the singular', () => {
    const plan = { prediction: { requests: 2, writes: 1, listPages: 1, seconds: 1, limit: '10 requests per 1 s' } };
    expect(predictionWords(plan as PlanRecord)).toBe(
      '2 requests (1 write, 1 list page for the drift check), about 1 s at 10 requests per 1 s',
    );
  });

  it('a CSV row names the row a spreadsheet shows it on beside its file line; other sources do not', () => {
    // Data row 101 sits on the sheet's row 102 (the header is row 1); quoted newlines moved its line to 111.
    expect(placeWords({ row: 101, line: 111 }, { options: { format: 'csv' } })).toBe('line 111, spreadsheet row 102');
    expect(placeWords({ row: 101, line: 111 }, { options: { format: 'ndjson' } })).toBe('line 111');
    expect(placeWords({ row: 3, ref: 'C-9' }, { options: { query: { query: 'select 1' } } })).toBe('key C-9');
    expect(placeWords({ row: 3, line: 4 })).toBe('line 4');
  });
});
