import { describe, expect, it } from 'vitest';
import { newRunId } from '../../src/runs/index.js';

describe('newRunId', () => {
  it('has no colon and is safe as a BullMQ job id prefix', () => {
    const id = newRunId(new Date('2026-11-23T03:55:12.345Z'));
    expect(id).not.toContain(':');
    expect(id).toMatch(/^20261123-035512-345-[0-9a-z]{8}$/);
  });

  it('sorts by time as a plain string', () => {
    const times = [
      '2026-01-01T00:00:00.000Z',
      '2026-01-01T00:00:00.001Z',
      '2026-01-01T00:00:01.000Z',
      '2026-02-01T00:00:00.000Z',
      '2027-01-01T00:00:00.000Z',
    ];
    const ids = times.map((t) => newRunId(new Date(t)));
    expect([...ids].reverse().sort()).toEqual(ids);
  });

  it('is unique for the same instant', () => {
    const now = new Date();
    const ids = new Set(Array.from({ length: 1000 }, () => newRunId(now)));
    expect(ids.size).toBe(1000);
  });
});

describe('newRunId within one millisecond', () => {
  it('still sorts in creation order', () => {
    const now = new Date('2026-05-05T05:05:05.005Z');
    const ids = Array.from({ length: 50 }, () => newRunId(now));
    expect([...ids].sort()).toEqual(ids);
  });
});
