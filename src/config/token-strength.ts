import { CrmSyncError } from '../errors/index.js';
import type { Secret } from './secret.js';
import { tally } from '../counts/index.js';

/** Shortest dashboard token accepted: `openssl rand -hex 16` makes exactly this many characters. */
export const MIN_TOKEN_LENGTH = 32;
export const MAKE_TOKEN_HINT = 'make one with: openssl rand -hex 16';

/**
 * Fewest different characters a token may have. 32 characters of `openssl rand -hex 16` hold
 * about 14 on average; fewer than 8 happens about once in 10^8 tokens, while `aaaa…`, `abab…`
 * or `0000…1` (the tokens a person types to get past a length check) all have fewer.
 */
const MIN_DISTINCT = 8;

/** The shortest k such that the token is its first k characters over and over (k ≤ half), or null. */
function repeatingUnit(token: string): string | null {
  for (let k = 1; k <= token.length / 2; k++) {
    let repeats = true;
    for (let i = k; i < token.length && repeats; i++) repeats = token[i] === token[i - k];
    if (repeats) return token.slice(0, k);
  }
  return null;
}

/**
 * True when at least three quarters of the steps between neighbouring characters are the same
 * step (`abcdef…`, `0123456789…`, `zyxw…`): a sequence, not a secret. Random hex has about one
 * such step in sixteen.
 */
function isSequence(token: string): boolean {
  const steps = new Map<number, number>();
  for (let i = 1; i < token.length; i++) {
    const step = token.charCodeAt(i) - token.charCodeAt(i - 1);
    tally(steps, step);
  }
  const most = Math.max(0, ...steps.values());
  return most >= 0.75 * (token.length - 1);
}

/** Why a token is trivially guessable, or null when it is not. */
export function weakTokenReason(value: string): string | null {
  const token = value.trim();
  if (token.length < MIN_TOKEN_LENGTH) {
    return `has ${token.length} characters; it needs at least ${MIN_TOKEN_LENGTH}`;
  }
  const unit = repeatingUnit(token);
  if (unit !== null) {
    return unit.length === 1
      ? 'is one character repeated, which anyone can guess'
      : `is the same ${unit.length} characters over and over, which anyone can guess`;
  }
  const distinct = new Set(token).size;
  if (distinct < MIN_DISTINCT) {
    return `uses only ${distinct} different characters (at least ${MIN_DISTINCT} are needed), which anyone can guess`;
  }
  if (isSequence(token)) return 'is a run of consecutive characters, which anyone can guess';
  return null;
}

/**
 * Refuses a token a script could guess (CONFIG_INVALID, saying why and how to make a good one).
 * The message names where the token came from and never its value.
 */
export function checkTokenStrength(token: Secret, source = 'the dashboard token'): void {
  const reason = weakTokenReason(token.reveal());
  if (reason !== null) throw new CrmSyncError('CONFIG_INVALID', `${source} ${reason} (${MAKE_TOKEN_HINT})`);
}
