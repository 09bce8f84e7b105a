import { describe, expect, it } from 'vitest';
import { countsWords } from '../../src/cli/runs-list-action.js';
import { FINAL_ROW_STATUSES, type FinalRowStatus } from '../../src/runs/index.js';

describe('runs list (CLI) counts', () => {
  it('an all-unchanged sync reads as unchanged rows, not 0/301 ok; every kind is named', () => {
    const zero = Object.fromEntries(FINAL_ROW_STATUSES.map((k) => [k, 0])) as Record<FinalRowStatus, number>;
    expect(countsWords({ ...zero, total: 301, queued: 0, skipped: 301 })).toBe('301 rows: 301 unchanged');
    for (const kind of FINAL_ROW_STATUSES) {
      const words = countsWords({ ...zero, total: 7, queued: 2, [kind]: 5 });
      expect(words).toBe(`7 rows: 5 ${kind === 'skipped' ? 'unchanged' : kind}, 2 waiting`);
    }
  });
});
