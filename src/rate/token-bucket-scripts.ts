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

/** Claims send times for up to N requests in one step (GCRA, with a send log for a known limit). */
export const CLAIM = defineScript({
  file: 'claim-tokens-3',
  keys: ['tatKey', 'rateKey', 'logKey'],
  args: ['interval', 'tolerance', 'n', 'horizon', 'startRate', 'window', 'max', 'unused', 'lead', 'climbMs'],
  reply: valueReply((raw): Claimed => {
    // {wait, now, offset...}, numbers as text: one array for the offsets, as the reply's map was.
    const reply = raw as string[];
    const offsets = new Array<number>(Math.max(0, reply.length - 2));
    for (let i = 0; i < offsets.length; i++) offsets[i] = Number(reply[i + 2]);
    return { wait: Number(reply[0] ?? 0), now: Number(reply[1] ?? 0), offsets };
  }),
});

/** A 429's pause: no send time before its end; a learned rate is cut (or measured). Answers the rate. */
export const PAUSE = defineScript({
  file: 'pause-tokens-2',
  keys: ['tatKey', 'rateKey'],
  args: ['pauseMs', 'tolerance', 'learning', 'cooldownMs', 'minRate', 'measureSpanMs', 'unused'],
  reply: numberReply,
});

/** Gives back send times granted but missed (known limit): out of the send log, and the TAT back. How many. */
export const RELEASE = defineScript({
  file: 'release-tokens-3',
  keys: ['tatKey', 'rateKey', 'logKey'],
  args: ['interval'],
  rest: 'times',
  reply: numberReply,
});
