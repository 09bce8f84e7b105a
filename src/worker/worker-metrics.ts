import { METRIC, type MetricsRecorder } from '../metrics/index.js';

/**
 * The worker's counters for the dashboard's /metrics. Counts of rows and requests also go to
 * the run's own activity series (`runId`), which is not a label: labels stay few per workspace.
 */
export class WorkerMetrics {
  constructor(
    private readonly recorder: MetricsRecorder | undefined,
    private readonly workspace: string,
  ) {}

  /** One request answered: `status` is its HTTP status (`2xx` for a success), or `network`. */
  request(operation: string, status: string, runId: string): void {
    this.recorder?.inc(METRIC.requests, this.#labels(METRIC.requests, operation, status), 1, runId);
  }

  /** Final row results. */
  rows(operation: string, status: 'succeeded' | 'failed', rows: number, runId: string): void {
    if (rows > 0) this.recorder?.inc(METRIC.rows, this.#labels(METRIC.rows, operation, status), rows, runId);
  }

  /** One label object per counter, kept: the recorder finds its field by the object (two counters a row). */
  readonly #labelSets = new Map<string, Record<string, string>>();

  #labels(metric: string, operation: string, status: string): Record<string, string> {
    const key = `${metric}\u0000${operation}\u0000${status}`;
    let labels = this.#labelSets.get(key);
    if (labels === undefined) {
      labels = { workspace: this.workspace, operation, status };
      this.#labelSets.set(key, labels);
    }
    return labels;
  }

  /** Rows a request succeeded for: the request and its rows. */
  succeeded(operation: string, rows: number, runId: string): void {
    this.request(operation, '2xx', runId);
    this.rows(operation, 'succeeded', rows, runId);
  }

  retry(operation: string): void {
    this.recorder?.inc(METRIC.retries, { workspace: this.workspace, operation });
  }

  rateLimited(runId: string): void {
    this.recorder?.inc(METRIC.rateLimited, { workspace: this.workspace }, 1, runId);
  }
}
