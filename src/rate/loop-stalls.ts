import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** How often the stall histogram is read and reset (ms). */
const SAMPLE_EVERY_MS = 1000;
/** Stalls within this long count (samples kept: this ÷ SAMPLE_EVERY_MS). */
const MEMORY_MS = 10_000;
/** The histogram's sampling timer (ms): finer costs CPU, coarser misses short stalls. */
const RESOLUTION_MS = 5;

/**
 * How long this process's event loop was held up lately: the longest delay of a timer within
 * MEMORY_MS (perf_hooks' monitorEventLoopDelay, one for the process, started on first use and
 * never keeping it alive). A request whose send time comes during a stall leaves that much
 * late, bunched against the next ones: the known-limit budget's margin covers it
 * (SharedTokenBucket) before a late send is ever seen, since a loaded box stalls the loop
 * between requests as often as during them.
 */
class LoopStalls {
  readonly #histogram: IntervalHistogram;
  /** The longest delay of each past sample period, newest last (ms). */
  readonly #maxima: number[] = [];
  #recent = 0;

  constructor() {
    this.#histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    this.#histogram.enable();
    setInterval(() => this.#sample(), SAMPLE_EVERY_MS).unref();
  }

  /** The longest stall of the last MEMORY_MS, the period under way included (ms). */
  get recentMs(): number {
    return Math.max(this.#recent, this.#periodMs());
  }

  #periodMs(): number {
    // The histogram counts from its sampling timer's due time, so a quiet loop reads about
    // RESOLUTION_MS; what matters is the delay beyond it. (max is 0 before the first sample.)
    return Math.max(0, this.#histogram.max / 1e6 - RESOLUTION_MS);
  }

  #sample(): void {
    this.#maxima.push(this.#periodMs());
    this.#histogram.reset();
    if (this.#maxima.length > MEMORY_MS / SAMPLE_EVERY_MS) this.#maxima.shift();
    this.#recent = Math.max(...this.#maxima);
  }
}

let stalls: LoopStalls | undefined;

/** This process's longest event-loop stall of the last ten seconds (ms); starts watching on first call. */
export function recentLoopStallMs(): number {
  stalls ??= new LoopStalls();
  return stalls.recentMs;
}
