/**
 * BullMQ's limiter lets `max` jobs start at the beginning of each window: 50 requests in the
 * first few milliseconds of every second. A CRM that meters with a token bucket or a sliding
 * window sees two such bursts a hair under a second apart as over the limit and answers 429,
 * and each 429 stalls the whole workspace for Retry-After. Splitting the window into up to 10
 * equal parts keeps the same rate with bursts a tenth the size.
 */
export function smoothRateLimit(limit: { max: number; durationMs: number }): { max: number; durationMs: number } {
  let parts = 1;
  for (let k = Math.min(10, limit.max); k > 1; k--) {
    if (limit.max % k === 0) {
      parts = k;
      break;
    }
  }
  return { max: limit.max / parts, durationMs: Math.ceil(limit.durationMs / parts) };
}
