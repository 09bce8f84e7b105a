import { defineScript, numberReply, valueReply } from '../redis/index.js';

/*
 * The shared request budget's scripts (token-bucket.ts), in src/redis/commands/*.lua (each
 * file's header names its KEYS and ARGV and says how the budget works; each wrapper names the
 * same, test/redis/script-contracts.test.ts). Times are Redis's clock (TIME), the one clock
 * every worker process shares; replies give send times as ms from that now.
 */

/** What CLAIM grants: Redis's now (ms), the send times as ms from it, or how long to wait for none. */
export interface Claimed {
  wait: number;
  now: number;
  offsets: number[];
}

/** The budget's keys, as every claim of send times names them (claim-tokens, begin-update). */
export const CLAIM_KEYS = ['tatKey', 'rateKey', 'logKey'] as const;
/** A claim's arguments (includes/claim-send-times.lua), in the order the scripts take them. */
export const CLAIM_ARGS = [
  'interval',
  'tolerance',
  'n',
  'horizon',
  'startRate',
  'window',
  'max',
  'unused',
  'lead',
  'climbMs',
] as const;
export type ClaimKeys = Record<(typeof CLAIM_KEYS)[number], string>;
export type ClaimArgs = Record<(typeof CLAIM_ARGS)[number], string | number>;

/** A budget's keys from its TAT key: the learned rate and the send log beside it unless named. */
export function claimKeys(tatKey: string, rateKey = `${tatKey}:rate`): ClaimKeys {
  return { tatKey, rateKey, logKey: `${tatKey}:log` };
}

/**
 * A claim of send times another script's call carries (begin-update: a row's send time claimed
 * in the write fence's step, SharedTokenBucket.carry). `n` 0 in NO_CLAIM: none is claimed.
 */
export interface CarriedClaim {
  keys: ClaimKeys;
  args: ClaimArgs;
}
export const NO_CLAIM: ClaimArgs = {
  interval: 0,
  tolerance: 0,
  n: 0,
  horizon: 0,
  startRate: 0,
  window: 0,
  max: 0,
  unused: 0,
  lead: 0,
  climbMs: 0,
};

/** {wait, now, offset...}, numbers as text: one array for the offsets, as the reply's map was. */
export function claimedFrom(reply: readonly string[]): Claimed {
  const offsets = new Array<number>(Math.max(0, reply.length - 2));
  for (let i = 0; i < offsets.length; i++) offsets[i] = Number(reply[i + 2]);
  return { wait: Number(reply[0] ?? 0), now: Number(reply[1] ?? 0), offsets };
}

/** Claims send times for up to N requests in one step (GCRA, with a send log for a known limit). */
export const CLAIM = defineScript({
  file: 'claim-tokens-3',
  keys: CLAIM_KEYS,
  args: CLAIM_ARGS,
  reply: valueReply((raw): Claimed => claimedFrom(raw as string[])),
});

/**
 * What PAUSE answers: the rate after it (0 with a known limit), and the instant (Redis's clock,
 * ms) from which the episode's first 429 counted grants as pending: grants at or before it count
 * as sent, so a process tells those it never sent (`unused`).
 */
export interface Paused {
  rate: number;
  judge: number;
}

/** A 429's pause: no send time before its end; a learned rate is cut (or measured). */
export const PAUSE = defineScript({
  file: 'pause-tokens-2',
  keys: ['tatKey', 'rateKey'],
  args: ['pauseMs', 'tolerance', 'learning', 'cooldownMs', 'minRate', 'measureSpanMs', 'unused'],
  rest: 'caught',
  reply: valueReply((raw): Paused => {
    const [rate, judge] = raw as string[];
    return { rate: Number(rate ?? 0), judge: Number(judge ?? 0) };
  }),
});

/** Gives back send times granted but missed (known limit): out of the send log, and the TAT back. How many. */
export const RELEASE = defineScript({
  file: 'release-tokens-3',
  keys: ['tatKey', 'rateKey', 'logKey'],
  args: ['interval'],
  rest: 'times',
  reply: numberReply,
});

/**
 * Moves late requests' entries in the send log to when they really left (known limit): `pairs`
 * is granted, sent, … on Redis's clock. How many moved.
 */
export const NOTE_LATE = defineScript({
  file: 'note-late-sends-1',
  keys: ['logKey'],
  args: [],
  rest: 'pairs',
  reply: numberReply,
});
