/** A send time claimed: when to send, on this process's clock (epoch ms), and as granted on Redis's clock. */
export interface Slot {
  at: number;
  granted: number;
}

/** A wait for a token that can be called off (SharedTokenBucket.reserve). */
export interface TokenWait {
  /** true once the token is taken; false when the wait ran out (`withinMs`) or was cancelled. */
  readonly granted: Promise<boolean>;
  /** When the token was taken (local epoch ms); undefined until then. */
  readonly takenAt: number | undefined;
  cancel(): void;
  /**
   * The request this token paced left at `at` (local epoch ms, sub-ms: the HTTP client's last
   * byte handed to the socket, CallOptions.onWire). With a known limit, a request that left
   * later than its send time allows moves its entry in the send log to when it left
   * (SharedTokenBucket, NOTE_LATE), so later grants count from there. Once; later calls do nothing.
   */
  sent(at: number): void;
}

/** One request waiting for its token: the bucket's own record of a TokenWait. */
export interface Waiter extends TokenWait {
  resolve(taken: boolean): void;
  reject(err: unknown): void;
  /** Local epoch ms past which the wait ends unserved (reserve's `withinMs`); Infinity: never. */
  readonly deadline: number;
  /** Runs until the send time this wait was given (`slot`). */
  timer: NodeJS.Timeout | undefined;
  /** The send time this wait was given, while its timer runs. */
  slot: Slot | undefined;
  /** No send time due before this is given to it (local epoch ms; 0: any). reserve's afterRoundTrip. */
  notBefore: number;
  /** The send time of the token this wait handed out (cancel gives it back). */
  taken: Slot | undefined;
  takenAt: number | undefined;
  /** Its request was seen leaving (sent): told once. */
  wired: boolean;
  /** Settled or called off: nothing more happens to it. */
  done: boolean;
  /** The waits sharing its abort signal (WaitWatch), while it is watched. */
  aborts: Set<Waiter> | undefined;
}

/** Builds a wait with every field in place (one object shape for all of them). */
export function newWaiter(
  deadline: number,
  cancel: (w: Waiter) => void,
  sent: (w: Waiter, at: number) => void = () => undefined,
): Waiter {
  let resolve!: (taken: boolean) => void;
  let reject!: (err: unknown) => void;
  const granted = new Promise<boolean>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const w: Waiter = {
    granted,
    resolve,
    reject,
    deadline,
    cancel: () => cancel(w),
    sent: (at) => {
      if (w.wired) return;
      w.wired = true;
      sent(w, at);
    },
    timer: undefined,
    slot: undefined,
    notBefore: 0,
    taken: undefined,
    takenAt: undefined,
    wired: false,
    done: false,
    aborts: undefined,
  };
  return w;
}

/** What ends a wait from outside: its deadline passing, or its signal aborting. */
export interface WaitEnds {
  expire(w: Waiter): void;
  abort(w: Waiter, reason: unknown): void;
}

/**
 * Watches the waits' deadlines with one timer, and their abort signals with one listener per
 * signal (a job attempt's), instead of a timer and a listener for each wait. Every row takes a
 * token, and at full speed its wait lasts well under a millisecond: arming and clearing a
 * deadline timer and adding and removing an abort listener for each one was a measurable share
 * of a row's CPU (bench/RESULTS.md, "The ratio back to where it was before issue 32"). The
 * timer is unref'd: a wait always has a claim, a retry timer or its slot's timer keeping the
 * process alive.
 */
export class WaitWatch {
  /** Waits with a deadline, not yet ended. */
  readonly #timed = new Set<Waiter>();
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  /** The waits of each signal; the signal's one listener ends them all. */
  readonly #bySignal = new WeakMap<AbortSignal, Set<Waiter>>();

  constructor(private readonly ends: WaitEnds) {}

  add(w: Waiter, signal: AbortSignal | undefined): void {
    if (signal) {
      let waits = this.#bySignal.get(signal);
      if (!waits) {
        const own = new Set<Waiter>();
        waits = own;
        this.#bySignal.set(signal, own);
        // Never removed: it lives as long as the signal, one per job attempt.
        signal.addEventListener(
          'abort',
          () => {
            for (const x of [...own]) this.ends.abort(x, signal.reason);
          },
          { once: true },
        );
      }
      waits.add(w);
      w.aborts = waits;
    }
    if (w.deadline !== Number.POSITIVE_INFINITY) {
      this.#timed.add(w);
      if (w.deadline < this.#timerAt) this.#arm(w.deadline);
    }
  }

  /** The wait ended (settled, called off, expired, aborted): no longer watched. */
  remove(w: Waiter): void {
    if (w.aborts) {
      w.aborts.delete(w);
      w.aborts = undefined;
    }
    this.#timed.delete(w);
  }

  #arm(at: number): void {
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#sweep(), Math.max(0, at - Date.now()));
    this.#timer.unref();
  }

  #sweep(): void {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const w of [...this.#timed]) {
      if (w.deadline <= now) this.ends.expire(w);
      else if (w.deadline < next) next = w.deadline;
    }
    if (next !== Number.POSITIVE_INFINITY) this.#arm(next);
  }
}
