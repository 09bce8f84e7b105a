import { describe, expect, it } from 'vitest';
import { countOf, tally } from '../src/counts/index.js';

describe('counting', () => {
  it('tallies in a Map and in a record, from nothing', () => {
    const m = new Map<string, number>();
    expect(tally(m, 'a')).toBe(1);
    expect(tally(m, 'a', 4)).toBe(5);
    const r: Record<number, number> = {};
    tally(r, 429);
    tally(r, 429);
    expect(r).toEqual({ 429: 2 });
  });

  it('reads a stored count: absent is 0, Redis digits are numbers', () => {
    expect([countOf(null), countOf(undefined), countOf('17'), countOf(3)]).toEqual([0, 0, 17, 3]);
  });
});
