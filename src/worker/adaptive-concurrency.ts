export interface AdaptiveConcurrencyOptions {
  /** Upper bound, the configured concurrency. */
  max: number;
  /** Lower bound. Default 1. */
  min?: number;
  /** Successes in a row before adding one slot. Default 20. */
  increaseEvery?: number;
}

/**
 * AIMD for a workspace whose rate limit we do not know: halve the jobs in flight on a 429,
 * add one back after a run of successes (TCP's congestion control, applied to API calls).
 */
export class AdaptiveConcurrency {
  readonly max: number;
  readonly min: number;
  readonly #increaseEvery: number;
  #current: number;
  #streak = 0;

  constructor(options: AdaptiveConcurrencyOptions) {
    this.max = Math.max(1, options.max);
    this.min = Math.max(1, Math.min(options.min ?? 1, this.max));
    this.#increaseEvery = options.increaseEvery ?? 20;
    this.#current = this.max;
  }

  get current(): number {
    return this.#current;
  }

  /** Returns the new concurrency. */
  onSuccess(): number {
    this.#streak += 1;
    if (this.#streak >= this.#increaseEvery && this.#current < this.max) {
      this.#current += 1;
      this.#streak = 0;
    }
    return this.#current;
  }

  onRateLimited(): number {
    this.#streak = 0;
    this.#current = Math.max(this.min, Math.floor(this.#current / 2));
    return this.#current;
  }
}
