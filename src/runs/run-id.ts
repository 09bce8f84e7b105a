import { randomInt } from 'node:crypto';

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

function pad(value: number, width: number): string {
  return String(value).padStart(width, '0');
}

function randomChars(count: number): string {
  let out = '';
  for (let i = 0; i < count; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return out;
}

// Ids made in the same millisecond by this process carry a rising sequence so they still sort
// in creation order (the run list breaks score ties by id); the random tail keeps ids from
// different processes apart.
let lastStamp = '';
let sequence = 0;

/**
 * A run id such as `20261123-035512-345-000k3j9q`: UTC date, time and milliseconds, a 3-char
 * per-millisecond sequence, then 5 random chars. Ids sort by creation time as plain strings,
 * are safe in file names and URLs, and contain no ':' (BullMQ forbids ':' in custom job ids,
 * and job ids are `${runId}-${row}`).
 */
export function newRunId(now: Date = new Date()): string {
  const date = `${pad(now.getUTCFullYear(), 4)}${pad(now.getUTCMonth() + 1, 2)}${pad(now.getUTCDate(), 2)}`;
  const time = `${pad(now.getUTCHours(), 2)}${pad(now.getUTCMinutes(), 2)}${pad(now.getUTCSeconds(), 2)}`;
  const stamp = `${date}-${time}-${pad(now.getUTCMilliseconds(), 3)}`;
  sequence = stamp === lastStamp ? sequence + 1 : 0;
  lastStamp = stamp;
  return `${stamp}-${sequence.toString(36).padStart(3, '0')}${randomChars(5)}`;
}
