/**
 * Process exit codes, documented in docs/troubleshooting.md and `crm-sync --help`, so that cron jobs and
 * CI scripts can tell "some rows failed" from "nothing could run".
 */
export const EXIT = {
  /** Everything asked for was done; every row succeeded or was skipped. */
  OK: 0,
  /** The run finished but some rows failed, were invalid, uncertain, drifted or cancelled (see the failed-rows export). */
  ROWS_FAILED: 1,
  /** Bad arguments, configuration or input file: nothing was sent. */
  USAGE: 2,
  /** The CRM refused the API key: the run is blocked (fix the key, then `crm-sync runs resume`), or a worker refused to start. */
  BLOCKED: 3,
  /** Redis or another dependency was unreachable, or an unexpected internal error. */
  INTERNAL: 4,
  /**
   * Redis stopped answering (or, while the file was read, stayed full: REDIS_FULL) for longer
   * than --redis-outage while the command read or followed a run. Its workers go on; look again
   * with `crm-sync runs show <id>`, or, stopped mid-file, go on with `crm-sync runs resume <id>`.
   */
  REDIS_LOST: 5,
  /**
   * Redis lost the run's data while it was under way (restarted without persistence, flushed, or
   * evicting keys: REDIS_EVICTS). Rows may have reached the CRM before: never "nothing was sent".
   * The message says how many were sent as far as known, and how to send the rest without
   * duplicates (for creates: a reconciled import, never a plain one).
   */
  REDIS_DATA_LOST: 6,
  /**
   * Held for approval: nothing was sent. A guarded nightly sync's tick went over its guard (or
   * its sync or workspace asks approval of every tick) and waits as a plan; the output names the
   * plan and the commands that review, approve and apply it (`--json`: `held`).
   */
  HELD: 7,
  /**
   * The CRM answered in a way its spec does not allow (CRM_BAD_RESPONSE: a body off the schema,
   * another page than the one asked): the command stopped there. Not crm-sync's fault, nor
   * Redis': the message names the request; a run's rows keep their own results.
   */
  CRM_BAD_ANSWER: 8,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
