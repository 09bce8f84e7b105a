import type { SimRateLimit } from './sim-options.js';

/** Capacity `max`, refilled continuously at `max` per `windowMs`; starts full. */
export class TokenBucket {
  private tokens: number;
  private last: number;
  private readonly perMs: number;

  constructor(
    private readonly limit: SimRateLimit,
    now: number = Date.now(),
  ) {
    this.tokens = limit.max;
    this.last = now;
    this.perMs = limit.max / limit.windowMs;
  }

  /** Takes a token: 0 when granted, else the ms until one is available. */
  take(now: number = Date.now()): number {
    this.tokens = Math.min(this.limit.max, this.tokens + Math.max(0, now - this.last) * this.perMs);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - this.tokens) / this.perMs));
  }
}
