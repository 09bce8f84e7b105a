import { describe, expect, it } from 'vitest';
import { countsWords, statusWord } from '../../src/cli/runs-list-action.js';
import { FINAL_ROW_STATUSES, type FinalRowStatus, type RunOptions } from '../../src/runs/index.js';

const zero = Object.fromEntries(FINAL_ROW_STATUSES.map((k) => [k, 0])) as Record<FinalRowStatus, number>;
const of = (counts: Record<string, number>, options: RunOptions = {}) => ({
  counts: { ...zero, total: 0, queued: 0, ...counts },
  options,
});

describe('runs list (CLI) counts', () => {
  it('an all-unchanged sync reads as unchanged rows, not 0/301 ok; every kind is named', () => {
    expect(countsWords(of({ total: 301, skipped: 301 }))).toBe('301 rows: 301 unchanged');
    expect(countsWords(of({ total: 1, skipped: 1 }))).toBe('1 row: 1 unchanged');
    for (const kind of FINAL_ROW_STATUSES) {
      const words = countsWords(of({ total: 7, queued: 2, [kind]: 5 }));
      expect(words).toBe(`7 rows: 5 ${kind === 'skipped' ? 'unchanged' : kind}, 2 waiting`);
    }
  });

  it('a dry run is marked and its valid rows read as would-be-sent, as runs show says them', () => {
    expect(countsWords(of({ total: 2000, skipped: 1993, invalid: 7 }, { dryRun: true }))).toBe(
      'DRY RUN 2,000 rows: 1,993 would be sent, 7 invalid',
    );
    expect(countsWords(of({ total: 3, skipped: 3 }, { dryRun: true, reconcile: true }))).toBe(
      'DRY RUN 3 rows: 3 would be sent or unchanged',
    );
  });

  it('a held tick says held with its plan and the rows the file has, not "completed · 0 rows"', () => {
    const held = { status: 'completed' as const, ...of({}, { held: { planId: 'p-1', rows: 2000 } }) };
    expect(statusWord(held)).toBe('held');
    expect(countsWords(held)).toBe('held: 2,000 rows planned in plan p-1, nothing sent');
    expect(statusWord({ status: 'completed', options: {} })).toBe('completed');
  });
});
