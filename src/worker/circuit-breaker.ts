import { CrmError, NotFoundError, RejectedError, TransientError } from '../crm/index.js';
import type { Logger } from '../log/index.js';
import type { KeyCheck } from '../runtime/index.js';

export interface CircuitBreakerOptions {
  /** The CRM's address, for the messages. */
  baseUrl: string;
  /**
   * One cheap request that tells whether the baseUrl answers like the CRM (a one-deal list:
   * `checkKey`). Used to tell a record's 404 from a wrong address's, and as the half-open probe.
   */
  probe: () => Promise<KeyCheck>;
  /** Opens the breaker: holds the workspace with this reason (every process stops taking its jobs). */
  open: (reason: string) => Promise<void>;
  /** Closes it: lifts the hold. Answers whether the queue runs again. */
  close: () => Promise<boolean>;
  /** Whether the workspace is held by an open breaker (this process's or another's). */
  isOpen: () => Promise<boolean>;
  /** Takes one request from the workspace's shared budget before each probe. */
  takeToken: () => Promise<void>;
  logger: Logger;
  /** Unreachable failures in a row, with no success between, that open the breaker. */
  threshold: number;
  /** How long a probe that found the CRM vouches for later 404s being about records (ms). */
  confirmMs: number;
  /** Half-open: how often an open breaker probes the CRM (ms). */
  probeEveryMs: number;
  /** How often a closed breaker looks whether another process opened one, to probe if that one died (ms). */
  watchEveryMs: number;
}

/** What a failure means for the workspace: go on as the error says, or stop it here. */
export type BreakerVerdict = { kind: 'pass' } | { kind: 'open'; reason: string };

/**
 * Stops a workspace whose requests all fail the same way because of where they go, not what
 * they carry (docs/architecture.md, "Circuit breaker"): connection refused, DNS failure, a
 * connect timeout — a streak of `threshold` with no success between — or a 404 / redirect
 * when a probe shows the baseUrl does not answer like the CRM (a typo in `baseUrl`). Without it
 * every row would spend its attempts (≈14 s of retries) or be failed as "not found".
 *
 * Open: the workspace is held (its queue paused for every process), the job that saw it goes
 * back without spending an attempt. Half-open: every `probeEveryMs` one process (a Redis lock
 * is not needed: a probe is one cheap GET) probes; an answer like the CRM's closes it.
 * `workspace resume` closes it too.
 */
export class CircuitBreaker {
  readonly #o: CircuitBreakerOptions;
  #streak = 0;
  #streakCode = '';
  #confirmedAt = 0;
  #probing: Promise<KeyCheck> | undefined;
  #open = false;
  #reason = 'the workspace is held by the circuit breaker: the CRM does not answer';
  #halfOpen: NodeJS.Timeout | undefined;
  #watch: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: CircuitBreakerOptions) {
    this.#o = options;
  }

  /** Starts watching for a breaker another process opened (it may have died before closing it). */
  start(): void {
    const every = this.#o.watchEveryMs;
    const look = (): void => {
      if (this.#open || this.#stopped) return;
      this.#o
        .isOpen()
        .then((open) => {
          if (open && !this.#open && !this.#stopped) this.#becomeOpen();
        })
        .catch(() => undefined);
    };
    look();
    this.#watch = setInterval(look, every);
    this.#watch.unref();
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#watch);
    clearInterval(this.#halfOpen);
  }

  /** A request was answered (any status the CRM gives, even a rejection of the row). */
  onAnswer(): void {
    this.#streak = 0;
    this.#confirmedAt = Date.now();
  }

  /** Judges a failed request. Anything that is not about where requests go passes. */
  async judge(err: unknown): Promise<BreakerVerdict> {
    if (err instanceof TransientError && err.unreachable !== undefined) return this.#unreachable(err.unreachable);
    if (err instanceof NotFoundError || (err instanceof RejectedError && isRedirect(err.status))) {
      return this.#wrongAddress(err.status);
    }
    // Any other failure breaks the streak; a 4xx (a rejected row, a 429, a 401) is the CRM answering.
    if (err instanceof CrmError && err.status !== undefined && err.status < 500) this.onAnswer();
    else this.#streak = 0;
    return { kind: 'pass' };
  }

  /**
   * Held in Redis: opened here or by another process (whose jobs then go back at once instead of
   * spending attempts on their own streak); an operator's `workspace resume` closes it for all.
   */
  async #stillOpen(): Promise<boolean> {
    const held = await this.#o.isOpen();
    if (held && !this.#open) this.#becomeOpen();
    else if (!held && this.#open) this.#becomeClosed();
    return held;
  }

  async #unreachable(code: string): Promise<BreakerVerdict> {
    if (await this.#stillOpen()) return { kind: 'open', reason: this.#reason };
    this.#streak = code === this.#streakCode ? this.#streak + 1 : 1;
    this.#streakCode = code;
    const threshold = this.#o.threshold;
    if (this.#streak < threshold) return { kind: 'pass' };
    return this.#trip(`the CRM at ${this.#o.baseUrl} is unreachable (${code}, ${this.#streak} requests in a row)`);
  }

  async #wrongAddress(status: number | undefined): Promise<BreakerVerdict> {
    // A record's 404 from a CRM that answered lately costs nothing more.
    if (!this.#open && Date.now() - this.#confirmedAt < this.#o.confirmMs) return { kind: 'pass' };
    if (await this.#stillOpen()) return { kind: 'open', reason: this.#reason };
    // One probe at a time, shared by every row that asks meanwhile.
    this.#probing ??= this.#probe().finally(() => {
      this.#probing = undefined;
    });
    const check = await this.#probing;
    if (check.verdict === 'ok' || check.verdict === 'rejected') {
      // Something that answers like the CRM: the 404 is about the record, as it says.
      this.#confirmedAt = Date.now();
      return { kind: 'pass' };
    }
    if (await this.#stillOpen()) return { kind: 'open', reason: this.#reason };
    // Only a NotFoundError comes without a status: it is a 404 by definition, not a setting.
    return this.#trip(`HTTP ${status ?? 404} for the rows, and ${check.message}`);
  }

  async #probe(): Promise<KeyCheck> {
    await this.#o.takeToken();
    return this.#o.probe();
  }

  async #trip(why: string): Promise<BreakerVerdict> {
    const every = Math.round(this.#o.probeEveryMs / 1000);
    const reason =
      `${why}: workspace held so rows are not spent. It goes on by itself once the CRM answers ` +
      `(checked every ${every} s), or after "crm-sync workspace resume".`;
    this.#becomeOpen();
    this.#reason = reason;
    await this.#o.open(reason);
    this.#o.logger.error({ baseUrl: this.#o.baseUrl }, `circuit breaker open: ${reason}`);
    return { kind: 'open', reason };
  }

  #becomeOpen(): void {
    this.#open = true;
    this.#streak = 0;
    clearInterval(this.#halfOpen);
    this.#halfOpen = setInterval(() => void this.#tryClose(), this.#o.probeEveryMs);
    this.#halfOpen.unref();
  }

  async #tryClose(): Promise<void> {
    if (this.#stopped || this.#probing) return;
    try {
      if (!(await this.#o.isOpen())) {
        // Someone ran `workspace resume` (or another process's probe closed it).
        this.#becomeClosed();
        return;
      }
      this.#probing = this.#probe();
      const check = await this.#probing;
      if (check.verdict !== 'ok' && check.verdict !== 'rejected') {
        this.#o.logger.debug({ check: check.verdict }, `circuit breaker stays open: ${check.message}`);
        return;
      }
      const running = await this.#o.close();
      this.#becomeClosed();
      this.#confirmedAt = Date.now();
      this.#o.logger.info(
        { running },
        `circuit breaker closed: ${check.message}${running ? '' : ' (the workspace stays paused by another hold)'}`,
      );
    } catch (err) {
      this.#o.logger.debug({ err: String(err) }, 'circuit breaker probe could not run');
    } finally {
      this.#probing = undefined;
    }
  }

  #becomeClosed(): void {
    this.#open = false;
    this.#streak = 0;
    clearInterval(this.#halfOpen);
    this.#halfOpen = undefined;
  }
}

function isRedirect(status: number | undefined): boolean {
  return status !== undefined && status >= 300 && status < 400;
}
