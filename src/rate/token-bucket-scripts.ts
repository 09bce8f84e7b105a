import { LuaScript } from '../redis/index.js';

/*
 * The shared request budget's scripts (token-bucket.ts), in src/redis/commands/*.lua (each
 * file's header names its KEYS and ARGV and says how the budget works). Times are Redis's clock
 * (TIME), the one clock every worker process shares; replies give send times as ms from that now.
 */

/** Claims send times for up to N requests in one step (GCRA, with a send log for a known limit). */
export const CLAIM = LuaScript.load('claim-tokens-3');

/** A 429's pause: no send time before its end; a learned rate is cut (or measured). */
export const PAUSE = LuaScript.load('pause-tokens-2');

/** Gives back send times granted but missed (known limit): out of the send log, and the TAT back. */
export const RELEASE = LuaScript.load('release-tokens-3');
