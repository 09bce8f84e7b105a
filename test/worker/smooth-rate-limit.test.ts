import { describe, expect, it } from 'vitest';
import { smoothRateLimit } from '../../src/worker/smooth-rate-limit.js';

describe('smoothRateLimit', () => {
  it('keeps the rate and shrinks the burst', () => {
    expect(smoothRateLimit({ max: 50, durationMs: 1000 })).toEqual({ max: 5, durationMs: 100 });
    expect(smoothRateLimit({ max: 7, durationMs: 1000 })).toEqual({ max: 1, durationMs: 143 });
    expect(smoothRateLimit({ max: 1, durationMs: 500 })).toEqual({ max: 1, durationMs: 500 });
  });
  it('never allows a higher rate than configured', () => {
    for (const max of [1, 2, 3, 11, 13, 24, 50, 97, 100, 1000]) {
      for (const durationMs of [100, 999, 1000, 60_000]) {
        const s = smoothRateLimit({ max, durationMs });
        expect(s.max / s.durationMs).toBeLessThanOrEqual(max / durationMs + 1e-12);
        expect(Number.isInteger(s.max) && s.max >= 1).toBe(true);
      }
    }
  });
});
