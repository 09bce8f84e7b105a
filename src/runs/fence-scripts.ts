import {
  asNumber,
  asString,
  codeReply,
  defineScript,
  flagReply,
  kindReply,
  numberReply,
  type FieldDecoder,
} from '../redis/index.js';
import { RESULT_BUCKET_ROWS } from '../keys/index.js';
import { CLAIM_ARGS, CLAIM_KEYS, claimedFrom, type Claimed } from '../rate/index.js';
import type { RefusalReason } from './run-scripts.js';

/*
 * The write fence's scripts (row-fence.ts; docs/architecture.md, "Delivery guarantees"), in
 * src/redis/commands/*.lua, each file's header naming its KEYS and ARGV. Each decides in one
 * atomic step whether a worker may send a row's request, or stores what the answer proved, so
 * that no interleaving of workers, redeliveries, retries and sweeps can send a row twice over a
 * stored result, put an older value over a newer one, or let two rows record one deal.
 *
 * Clocks: leases and markers use Redis' TIME (includes/redis-clock.lua), the one clock every
 * worker process shares. Create markers have one codec (includes/create-marker.lua), read here
 * by parseMarker.
 *
 * Each wrapper names the KEYS and ARGV its script's header names, and knows every reply kind
 * the script returns (test/redis/script-contracts.test.ts). The replies come out as the objects
 * RowFence answers, so a row's send allocates no more than the positional call did.
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

/** What an earlier attempt of a create left: when it was sent, and the deal once known. */
export interface CreateMarker {
  /** Redis clock when the POST was sent (ms). */
  sentAt: number;
  /** The CRM's clock at that moment as the worker estimated it (ms). */
  crmClockAt: number;
  /** The estimate came from the CRM's `Date` header (else it is the worker's own clock). */
  measured: boolean;
  /**
   * False for a marker `runs retry` put back after the row's own was gone: `sentAt` is then
   * only a time before the row's send (its run's creation), so no deal can be shown to be its own.
   */
  exact: boolean;
  /** The deal the attempt created, when its answer arrived but could not be recorded. */
  dealId?: string;
  /**
   * Redis clock when the attempt's answer was lost or a lookup left the create uncertain (ms):
   * a later look needs a pass begun after it (the deal, if made, was made before then).
   */
  uncertainAt?: number;
}

/** A create marker as the scripts answer it; its format and the Lua codec: commands/includes/create-marker.lua. */
export function parseMarker(text: string): CreateMarker {
  const [sentAt = '', crmClockAt = '', measured = '', dealId = '', uncertainAt = ''] = text.split('|');
  const marker: CreateMarker = {
    sentAt: Number(sentAt),
    crmClockAt: Number(crmClockAt),
    measured: measured === '1',
    exact: measured !== '2',
  };
  if (dealId !== '') marker.dealId = dealId;
  if (uncertainAt !== '') marker.uncertainAt = Number(uncertainAt);
  return marker;
}

const asMarker: FieldDecoder<CreateMarker> = (raw) => parseMarker(asString(raw));
/** A wait of at least a ms: a lease that ends now still waits for the next look. */
const asWaitMs: FieldDecoder<number> = (raw) => Math.max(1, Number(raw));
const asRefusal = asString as FieldDecoder<RefusalReason>;
/** A send time claimed in the same step ('' when none was asked): claim-tokens' reply as one string. */
const asClaimed: FieldDecoder<Claimed | undefined> = (raw) => {
  const text = asString(raw);
  return text === '' ? undefined : claimedFrom(text.split(' '));
};

/** includes/send-fence.lua: the checks every send passes first, and its KEYS[1..3]. */
const SEND = ['bucketKey', 'roundsKey', 'lockKey'] as const;
const SEND_ARGS = ['row', 'round', 'token'] as const;
const SEND_REFUSED = { 'has-result': {}, refused: { reason: asRefusal } } as const;

/** May a row's update be sent (per-field write order, the in-flight lease)? */
export const BEGIN_UPDATE = defineScript({
  file: 'begin-update-7',
  keys: [...SEND, 'orderKey', ...CLAIM_KEYS],
  args: [...SEND_ARGS, 'seq', 'leaseMs', 'windowMs', 'fields', 'required', ...CLAIM_ARGS],
  reply: kindReply({
    send: { written: asString, claimed: asClaimed },
    superseded: { by: asString, written: asString },
    wait: { ms: asWaitMs },
    ...SEND_REFUSED,
  }),
});
/** Ends a row's in-flight lease on its record. */
export const SETTLE_UPDATE = defineScript({
  file: 'settle-update-1',
  keys: ['orderKey'],
  args: ['seq', 'applied', 'windowMs'],
  reply: codeReply([1]),
});
/** May a row's create be sent (its marker, the fingerprint's lock)? */
export const BEGIN_CREATE = defineScript({
  file: 'begin-create-6',
  keys: [...SEND, 'markersKey', 'createLock', 'upsertedKey'],
  args: [...SEND_ARGS, 'owner', 'leaseMs', 'markerTtlMs', 'crmClockMs', 'measured', 'isUpsert'],
  reply: kindReply({
    exists: { dealId: asString },
    send: { marker: asMarker },
    doubt: { marker: asMarker, now: asNumber },
    wait: { ms: asWaitMs },
    ...SEND_REFUSED,
  }),
});
/** The create's outcome: the deal's claim, the marker's removal, the row's result, the record clock. */
export const FINISH_CREATE = defineScript({
  file: 'finish-create-14',
  keys: [
    'runKey',
    'runningKey',
    'blockedKey',
    'completedKey',
    'failedKey',
    'resultsBase',
    'problemsKey',
    'roundsKey',
    'lockKey',
    'markersKey',
    'createLock',
    'claimKey',
    'upsertedKey',
    'recordClock',
  ],
  args: [
    'now',
    'row',
    'round',
    'token',
    'owner',
    'deal',
    'success',
    'conflict',
    'claimTtlMs',
    'sentAt',
    'isUpsert',
    'createdAt',
    'resolutionMs',
    'clockTtlMs',
  ],
  constants: { RESULT_BUCKET_ROWS, RECORD_CLOCK_FRESH_MS, RECORD_CLOCK_DRIFT },
  reply: kindReply({ recorded: {}, conflict: { claimedBy: asString }, refused: { reason: asRefusal } }),
});
/** An attempt over without a deal: the lock released, the marker (and send evidence) removed, or stamped uncertain. */
export const RELEASE_CREATE = defineScript({
  file: 'release-create-3',
  keys: ['markersKey', 'createLock', 'bucketKey'],
  args: ['row', 'owner', 'sentAt', 'keep'],
  reply: codeReply([1]),
});
/** Keeps the fingerprint's lock through the settle time after an uncertain answer; stamps a lost answer's marker. */
export const HOLD_CREATE = defineScript({
  file: 'hold-create-3',
  keys: ['createLock', 'markersKey', 'bucketKey'],
  args: ['owner', 'ms', 'row', 'sentAt'],
  reply: flagReply,
});
/** Puts markers back for retried rows in doubt whose own had gone, and whose send evidence too: how many. */
export const RESTORE_CREATE = defineScript({
  file: 'restore-create-2',
  keys: ['markersKey', 'resultsBase'],
  args: ['markerTtlMs', 'since'],
  rest: 'rows',
  constants: { RESULT_BUCKET_ROWS },
  reply: numberReply,
});
