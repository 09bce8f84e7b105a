import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * Most events within any half-open span of `windowMs` (what a sliding-window rate limit counts):
 * the token bucket's test counts grants with it, the rate-window benchmark arrivals at its proxy.
 */
export function busiestWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/**
 * The shortest time in which `count` of `times` fall (ms; Infinity when there are fewer): with
 * `count` one over a limit, how far its windows were from holding one too many.
 */
export function tightestSpan(times: readonly number[], count: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let least = Number.POSITIVE_INFINITY;
  for (let i = count - 1; i < sorted.length; i++) least = Math.min(least, sorted[i]! - sorted[i - count + 1]!);
  return least;
}

/**
 * Watches this process's event loop from now on; `stop()` gives the longest stall seen (ms). A
 * test that stamps arrivals in its own process (the CRM proxies) stamps them late by up to that
 * much: 11 stamps within 1,000 ms − stall prove 11 arrivals within 1,000 ms, and nothing less
 * does (the stamps of a quiet process, stalls ~10 ms, make that the plain 1-s check, nearly).
 */
export function loopStallWatch(): { stop(): number } {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  return {
    stop() {
      histogram.disable();
      return histogram.max / 1e6;
    },
  };
}
