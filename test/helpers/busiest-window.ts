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
