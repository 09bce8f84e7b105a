/*
 * Counting, once: a tally that has not seen a key counted it 0 times, and a count a store left
 * out (Redis drops a hash field never incremented, BullMQ a state with no jobs, INFO a line it
 * has nothing for) is 0. Neither is a setting, so neither is in config/defaults.ts.
 */

/** Adds `n` to `key`'s tally in a Map or a plain record; answers the new tally. */
export function tally<K extends string | number>(counts: Map<K, number> | Record<K, number>, key: K, n = 1): number {
  if (counts instanceof Map) {
    const next = countOf(counts.get(key)) + n;
    counts.set(key, next);
    return next;
  }
  const next = countOf(counts[key]) + n;
  counts[key] = next;
  return next;
}

/** A count as stored (a number, Redis' digits, or nothing): what is absent counted nothing. */
export function countOf(stored: number | string | null | undefined): number {
  return stored === null || stored === undefined ? 0 : Number(stored);
}
