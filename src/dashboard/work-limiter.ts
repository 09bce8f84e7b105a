import { CrmSyncError } from '../errors/index.js';

export interface WorkLimits {
  /** Requests of this kind served at once. */
  running: number;
  /** Requests that may wait for a slot; more are answered 503 at once. */
  waiting: number;
}

/** The error for work abandoned because its client went away (nobody reads the answer). */
export function clientGone(detail = ''): CrmSyncError {
  return new CrmSyncError('CLIENT_GONE', `the client closed the connection${detail === '' ? '' : `; ${detail}`}`);
}

/**
 * Caps the requests of one heavy kind (problem searches, CSV exports, uploads): a few run, a
 * few wait in order, the rest are told to come back (DASHBOARD_BUSY, 503 with Retry-After).
 * A waiting request whose client disconnects leaves the line without ever starting.
 */
export class WorkLimiter {
  #active = 0;
  readonly #queue: Array<{ start: () => void; signal: AbortSignal; onAbort: () => void }> = [];

  constructor(
    readonly kind: string,
    readonly limits: WorkLimits,
  ) {}

  get active(): number {
    return this.#active;
  }

  /** Waits for a slot; the returned function frees it (call it exactly once). */
  async acquire(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) throw clientGone();
    if (this.#active >= this.limits.running) {
      if (this.#queue.length >= this.limits.waiting) {
        throw new CrmSyncError(
          'DASHBOARD_BUSY',
          `the dashboard is already serving ${this.#active} ${this.kind} at once; try again in a moment`,
        );
      }
      await new Promise<void>((resolve, reject) => {
        const entry = {
          signal,
          start: () => {
            signal.removeEventListener('abort', entry.onAbort);
            resolve();
          },
          onAbort: () => {
            const at = this.#queue.indexOf(entry);
            if (at !== -1) this.#queue.splice(at, 1);
            reject(clientGone());
          },
        };
        signal.addEventListener('abort', entry.onAbort, { once: true });
        this.#queue.push(entry);
      });
    } else {
      this.#active++;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#queue.shift();
      // The slot passes straight to the next in line, so #active only drops when nobody waits.
      if (next !== undefined) next.start();
      else this.#active--;
    };
  }

  /** Runs `work` in a slot. */
  async run<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
    const release = await this.acquire(signal);
    try {
      return await work();
    } finally {
      release();
    }
  }
}
