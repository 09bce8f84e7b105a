import { describe, expect, it } from 'vitest';
import {
  durationParts,
  durationWords,
  emptyCounts,
  formatDuration,
  runDurations,
  type RunRecord,
} from '../../src/runs/index.js';

/* The one duration wording the CLI's summary and the dashboard share (src/runs/run-durations.ts). */

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const iso = (ms: number) => new Date(T0 + ms).toISOString();

function run(fields: Partial<RunRecord>): RunRecord {
  return {
    id: 'r1',
    workspace: 'acme',
    operation: 'deal.update',
    source: 'a.csv',
    status: 'completed',
    counts: { ...emptyCounts(), total: 1, succeeded: 1 },
    columns: [],
    options: {},
    createdAt: iso(0),
    producerDone: true,
    producedRow: 1,
    activeMs: 0,
    passes: 0,
    ...fields,
  };
}

describe('run durations', () => {
  it('says one pass as the time it took, or so far while it goes', () => {
    expect(durationWords(run({ finishedAt: iso(400) }))).toBe('took 0.4 s');
    expect(durationWords(run({ status: 'running' }), T0 + 12_000)).toBe('12 s so far');
    expect(runDurations(run({ finishedAt: iso(400) }))).toEqual({
      activeMs: 400,
      wallMs: 400,
      lastPassMs: 400,
      passes: 1,
      ongoing: false,
    });
  });

  it('says active time, wall time and passes apart after a retry: a 0.1 s run retried later is not a slow run', () => {
    // First pass 0.1 s; retried 12 minutes later, the retry took 0.3 s.
    const retried = run({ passStartedAt: iso(720_000), finishedAt: iso(720_300), activeMs: 100, passes: 1 });
    expect(durationWords(retried)).toBe('active 0.4 s · wall 12 min 0 s · 2 passes (last 0.3 s)');
    expect(durationParts(retried)).toHaveLength(3);
    // While the third pass goes, active and last pass run up to now; wall too.
    const going = run({ status: 'running', passStartedAt: iso(3_600_000), activeMs: 400, passes: 2 });
    expect(durationWords(going, T0 + 3_602_000)).toBe(
      'active 2.4 s so far · wall 1 h 0 min · 3 passes (last 2.0 s so far)',
    );
  });

  it('formats from tenths of a second to days', () => {
    expect([400, 9_940, 45_000, 723_000, 7_500_000, 3 * 86_400_000 + 4 * 3_600_000].map(formatDuration)).toEqual([
      '0.4 s',
      '9.9 s',
      '45 s',
      '12 min 3 s',
      '2 h 5 min',
      '3 d 4 h',
    ]);
  });
});
