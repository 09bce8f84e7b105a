import { describe, expect, it } from 'vitest';
import { RECORD_STAMP_SPREAD_MS } from '../../../src/runs/index.js';
import { sendWindow } from '../../../src/worker/creates/index.js';

/*
 * Which creation times a lost create's own deal could have (src/worker/creates/deal-lookup.ts): a
 * deal stamped before `from` was made before the row's send, one after `after` after it, one
 * in between is inside the record clock's measured uncertainty (the row ends uncertain). The
 * spread (RECORD_STAMP_SPREAD_MS) is there because a CRM's stamps are not one clock: a lost
 * create's own deal, stamped a little earlier than the calibration's lower bound, must still be found.
 */
describe('sendWindow', () => {
  const marker = { sentAt: 1_000_000, crmClockAt: 0, measured: true, exact: true };
  const clock = { lo: -2, hi: 3, resolutionMs: 1, ageMs: 0 };

  it('is the calibrated offset around the send, widened below by the stamp resolution and the spread of stamps', () => {
    expect(sendWindow(marker, clock)).toEqual({ from: 999_997 - RECORD_STAMP_SPREAD_MS, after: 1_000_003 });
    // A CRM 120 s behind: the whole window moves with it.
    expect(sendWindow(marker, { ...clock, lo: -120_002, hi: -119_997 })).toEqual({
      from: 879_997 - RECORD_STAMP_SPREAD_MS,
      after: 880_003,
    });
    // Whole-second stamps: a deal stamped up to a second before may still be made after the send.
    expect(sendWindow(marker, { ...clock, resolutionMs: 1000 }).from).toBe(998_998 - RECORD_STAMP_SPREAD_MS);
  });

  it('widens by 100 ppm of the calibration age', () => {
    expect(sendWindow(marker, { ...clock, ageMs: 3_600_000 })).toEqual({
      from: 999_637 - RECORD_STAMP_SPREAD_MS,
      after: 1_000_363,
    });
  });

  it('has no "surely after" without an exact send time, and no bound at all without a calibration', () => {
    expect(sendWindow({ ...marker, exact: false }, clock)).toEqual({
      from: 999_997 - RECORD_STAMP_SPREAD_MS,
      after: Number.POSITIVE_INFINITY,
    });
    expect(sendWindow(marker, undefined)).toEqual({ from: 0, after: Number.POSITIVE_INFINITY });
  });
});
