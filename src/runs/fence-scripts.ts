import { LuaScript } from '../redis/index.js';
import { RESULT_BUCKET_ROWS } from '../keys/index.js';

/*
 * The write fence's scripts (row-fence.ts; docs/architecture.md, "Delivery guarantees"), in
 * src/redis/commands/*.lua, each file's header naming its KEYS and ARGV. Each decides in one
 * atomic step whether a worker may send a row's request, or stores what the answer proved, so
 * that no interleaving of workers, redeliveries, retries and sweeps can send a row twice over a
 * stored result, put an older value over a newer one, or let two rows record one deal.
 *
 * Clocks: leases and markers use Redis' TIME (includes/redis-clock.lua), the one clock every
 * worker process shares. Create markers have one codec (includes/create-marker.lua).
 */

/** A record clock calibrated longer ago than this starts again from the next sample. */
export const RECORD_CLOCK_FRESH_MS = 7 * 86_400_000;
/** How far two clocks may drift apart, as a share of the time since they were compared (100 ppm). */
export const RECORD_CLOCK_DRIFT = 0.0001;
/**
 * How much earlier than the record clock's lower bound a deal made after a moment may be stamped
 * (ms). A CRM's stamps are not one clock at one offset: one that keeps them strictly increasing
 * runs ahead of its clock in a burst (the simulator does, a ms a create), and one of several
 * servers stamps with several clocks; the calibration's lower bound is then that of the stamps
 * furthest ahead, and an on-time stamp falls below it. Too narrow, a lost create's own deal is
 * taken for an older one and the row is sent again (a duplicate); wider, a look-alike a person
 * made that much before the send makes the row uncertain instead of being passed over.
 */
export const RECORD_STAMP_SPREAD_MS = 250;

/** May a row's update be sent (per-field write order, the in-flight lease)? */
export const BEGIN_UPDATE = LuaScript.load('begin-update-4');
/** Ends a row's in-flight lease on its record. */
export const SETTLE_UPDATE = LuaScript.load('settle-update-1');
/** May a row's create be sent (its marker, the fingerprint's lock)? */
export const BEGIN_CREATE = LuaScript.load('begin-create-6');
/** The create's outcome: the deal's claim, the marker's removal, the row's result, the record clock. */
export const FINISH_CREATE = LuaScript.load('finish-create-14', {
  RESULT_BUCKET_ROWS,
  RECORD_CLOCK_FRESH_MS,
  RECORD_CLOCK_DRIFT,
});
/** An attempt over without a deal: the lock released, the marker (and send evidence) removed, or stamped uncertain. */
export const RELEASE_CREATE = LuaScript.load('release-create-3');
/** Keeps the fingerprint's lock through the settle time after an uncertain answer; stamps a lost answer's marker. */
export const HOLD_CREATE = LuaScript.load('hold-create-3');
/** Puts markers back for retried rows in doubt whose own had gone, and whose send evidence too. */
export const RESTORE_CREATE = LuaScript.load('restore-create-2', { RESULT_BUCKET_ROWS });
