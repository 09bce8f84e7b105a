import type { Logger } from '../log/index.js';

export interface CrmOutageWatchOptions {
  logger: Logger;
  /** Failing this long with no success in between is an outage worth a warning (ms). */
  thresholdMs: number;
  /** Rows of the workspace still without a result, for the warning. Default: not reported. */
  rowsWaiting?: () => Promise<number>;
}

/**
 * Retries are quiet (debug), so a CRM that stops answering would otherwise go unnoticed until
 * rows fail: once requests have failed for `thresholdMs` with no success in between, one warning
 * with counts; when a request succeeds again, one line saying so.
 */
export class CrmOutageWatch {
  readonly #o: CrmOutageWatchOptions;
  #since: number | undefined;
  #failures = 0;
  #warned = false;

  constructor(options: CrmOutageWatchOptions) {
    this.#o = options;
  }

  onFailure(reason: string): void {
    const now = Date.now();
    this.#since ??= now;
    this.#failures++;
    const threshold = this.#o.thresholdMs;
    if (this.#warned || now - this.#since < threshold) return;
    this.#warned = true;
    const seconds = Math.round((now - this.#since) / 1000);
    const failures = this.#failures;
    const rows = this.#o.rowsWaiting ? this.#o.rowsWaiting().catch(() => undefined) : Promise.resolve(undefined);
    void rows.then((waiting) =>
      this.#o.logger.warn(
        {
          seconds,
          requestsFailed: failures,
          ...(waiting !== undefined ? { rowsWaiting: waiting } : {}),
          lastError: reason,
        },
        `the CRM has not answered a request successfully for ${seconds} s (${failures} requests failed${waiting !== undefined ? `, ${waiting} rows waiting` : ''}): rows are retried with backoff and keep their attempts' results once it answers`,
      ),
    );
  }

  onSuccess(): void {
    if (this.#since === undefined) return;
    if (this.#warned) {
      const seconds = Math.round((Date.now() - this.#since) / 1000);
      this.#o.logger.info({ seconds, requestsFailed: this.#failures }, `the CRM answers again after ${seconds} s`);
    }
    this.#since = undefined;
    this.#failures = 0;
    this.#warned = false;
  }
}
