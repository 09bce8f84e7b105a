/** Counter names workers record (the dashboard's /metrics exposes them). */
export const METRIC = {
  /** API calls by outcome: label `status` is the HTTP status or `network`. */
  requests: 'crm_sync_requests_total',
  /** 429 answers. */
  rateLimited: 'crm_sync_rate_limited_total',
  /** Transient failures that were retried. */
  retries: 'crm_sync_retries_total',
  /** Final row results written by workers, by status. */
  rows: 'crm_sync_worker_rows_total',
} as const;
