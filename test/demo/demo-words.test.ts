import { describe, expect, it } from 'vitest';
import { kindWords } from '../../src/demo/index.js';
import { FINAL_ROW_STATUSES, type FinalRowStatus } from '../../src/runs/index.js';

describe("the demo's summary line", () => {
  it('names every result kind a run has, so no row is left out', () => {
    const zero = Object.fromEntries(FINAL_ROW_STATUSES.map((k) => [k, 0])) as Record<FinalRowStatus, number>;
    const counts = { ...zero, total: 40, queued: 0, succeeded: 36, failed: 2, invalid: 2 };
    expect(kindWords(counts)).toBe('36 succeeded, 2 failed, 2 invalid');
    for (const kind of FINAL_ROW_STATUSES) {
      const words = kindWords({ ...counts, [kind]: counts[kind] + 3 });
      expect(words).toContain(`${counts[kind] + 3} ${kind === 'skipped' ? 'unchanged' : kind}`);
    }
  });
});
