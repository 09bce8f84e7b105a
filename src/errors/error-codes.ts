import { EXIT, type ExitCode } from './exit-codes.js';

/** What the registry holds of one error code. */
export interface ErrorEntry {
  /**
   * What the code means, in the registry's own words (docs/troubleshooting.md's table): the
   * message of an error thrown without one of its own.
   */
  message: string;
  /** The CLI's exit code when a command stops with this error (`EXIT`, `crm-sync --help`). */
  exit: ExitCode;
  /** The dashboard's HTTP status when a request fails with it. */
  http: number;
}

/**
 * Every error code crm-sync can produce, one entry each (fastify's lib/errors.js habit): its
 * meaning, the CLI's exit code and the dashboard's HTTP status. Codes are stable strings:
 * scripts, exports and the dashboard match on them, so a code is never renamed once shipped.
 * A new code is one line here and one row of docs/troubleshooting.md's table (a test compares
 * them). `exit: EXIT.USAGE` marks what the person running a command can fix in what they typed
 * or set up (arguments, config, keys, input files, run ids); `http: 500` what a dashboard
 * request cannot be blamed for.
 */
export const ERRORS = {
  USAGE: { exit: EXIT.USAGE, http: 400, message: 'A command was called with arguments that do not fit' },
  CONFIG_NOT_FOUND: { exit: EXIT.USAGE, http: 500, message: 'The configuration file does not exist' },
  CONFIG_INVALID: { exit: EXIT.USAGE, http: 500, message: 'The configuration file or environment is invalid' },
  SECRET_MISSING: {
    exit: EXIT.USAGE,
    http: 500,
    message: "A workspace's API key could not be read from its env variable or file",
  },
  WORKSPACE_UNKNOWN: { exit: EXIT.USAGE, http: 404, message: 'The named workspace is not in the configuration' },
  CRM_AUTH: { exit: EXIT.BLOCKED, http: 500, message: 'The CRM refused the API key (401)' },
  CRM_RATE_LIMITED: { exit: EXIT.INTERNAL, http: 500, message: 'The CRM asked us to slow down (429)' },
  CRM_TRANSIENT: {
    exit: EXIT.INTERNAL,
    http: 500,
    message: 'The CRM or the network failed in a way that may pass (5xx, timeout, reset)',
  },
  CRM_NOT_FOUND: { exit: EXIT.INTERNAL, http: 500, message: 'The CRM has no record with that id (404)' },
  CRM_REJECTED: { exit: EXIT.INTERNAL, http: 500, message: 'The CRM rejected the request (4xx)' },
  CRM_BAD_RESPONSE: {
    exit: EXIT.CRM_BAD_ANSWER,
    http: 500,
    message: 'The CRM answered with a body that does not match the spec',
  },
  INPUT_UNREADABLE: { exit: EXIT.USAGE, http: 400, message: 'The input file cannot be opened or read' },
  INPUT_ENCODING: { exit: EXIT.USAGE, http: 400, message: 'The input file is not UTF-8' },
  INPUT_PARSE: { exit: EXIT.USAGE, http: 400, message: 'The input file is malformed at a line' },
  INPUT_TOO_LARGE: { exit: EXIT.USAGE, http: 413, message: 'A row or field exceeds the size limits' },
  MAPPING_INVALID: { exit: EXIT.USAGE, http: 400, message: 'The column mapping file is invalid' },
  INPUT_COLUMNS: {
    exit: EXIT.USAGE,
    http: 400,
    message: 'The file has columns that map to no field, or lacks a column the mapping names; nothing was sent',
  },
  INPUT_EMPTY: { exit: EXIT.USAGE, http: 500, message: 'The input file is empty' },
  ROW_INVALID: { exit: EXIT.INTERNAL, http: 500, message: 'A row does not satisfy the operation schema' },
  RUN_NOT_FOUND: { exit: EXIT.USAGE, http: 404, message: 'No run with that id exists' },
  RUN_STATE: { exit: EXIT.USAGE, http: 409, message: 'The run is not in a state that allows this action' },
  REDIS_UNAVAILABLE: { exit: EXIT.INTERNAL, http: 503, message: 'Redis cannot be reached' },
  REDIS_EVICTS: {
    exit: EXIT.USAGE,
    http: 500,
    message:
      'Redis is set to evict keys (maxmemory-policy): queued jobs and results could vanish, so crm-sync will not start',
  },
  REDIS_CLUSTER: {
    exit: EXIT.USAGE,
    http: 500,
    message: 'REDIS_URL points at a Redis Cluster node: name the cluster with REDIS_CLUSTER_NODES instead',
  },
  REDIS_LAYOUT: {
    exit: EXIT.INTERNAL,
    http: 500,
    message:
      "The keys under the prefix are in a layout this version cannot use (a newer version's, or a migration in progress)",
  },
  // A producer that waited out a full Redis as long as an outage stops the same way: resumable.
  REDIS_FULL: {
    exit: EXIT.REDIS_LOST,
    http: 500,
    message:
      'Redis stayed full (maxmemory) longer than --redis-outage while a run was produced; nothing more was sent, and `runs resume` goes on (exit 5)',
  },
  REDIS_LOST: {
    exit: EXIT.REDIS_LOST,
    http: 500,
    message: 'Redis stopped answering while a command followed a run; the run itself goes on in the workers',
  },
  REDIS_DATA_LOST: {
    exit: EXIT.REDIS_DATA_LOST,
    http: 500,
    message:
      "Redis lost a run's data while it was under way (restarted without persistence, flushed, or keys evicted); the message says how many rows were sent before and how to send the rest without duplicates",
  },
  SYNC_DEFINITION_INVALID: { exit: EXIT.USAGE, http: 500, message: 'A sync definition in jobs/ is invalid' },
  SYNC_NOT_FOUND: { exit: EXIT.USAGE, http: 500, message: 'No sync definition with that name exists' },
  RECONCILE_AMBIGUOUS: {
    exit: EXIT.INTERNAL,
    http: 500,
    message: 'A match key fits several CRM records (or repeats in the file); the row was not sent',
  },
  REFERENCE_UNKNOWN: {
    exit: EXIT.INTERNAL,
    http: 500,
    message:
      "A cell names a pipeline, stage, tag or company the CRM's records do not show (or a lookup key or value its mapping does not have); the row was not sent",
  },
  REFERENCE_AMBIGUOUS: {
    exit: EXIT.INTERNAL,
    http: 500,
    message:
      'A cell names several pipelines, stages, tags or companies (a stage name two pipelines share); the row was not sent',
  },
  RUN_ABORTED: {
    exit: EXIT.INTERNAL,
    http: 500,
    message: 'The run was stopped (too many failed rows) before this row was sent',
  },
  RUN_CANCELLED: {
    exit: EXIT.INTERNAL,
    http: 500,
    message: 'The run was cancelled (runs cancel) before this row was sent; runs retry sends it',
  },
  RESULT_UNREADABLE: {
    exit: EXIT.INTERNAL,
    http: 500,
    message: 'A stored row result cannot be decoded (written by an incompatible version?)',
  },
  ROW_SUPERSEDED: {
    exit: EXIT.INTERNAL,
    http: 500,
    message:
      'Not sent: later rows wrote every field this row would change and were applied first, so its older values must not follow them',
  },
  ROW_WRITTEN_LATER: {
    exit: EXIT.INTERNAL,
    http: 500,
    message:
      'Not sent again by a retry: later runs had written every field this row would change (runs retry --resend-superseded sends it as a new write)',
  },
  ROW_DRIFTED: {
    exit: EXIT.INTERNAL,
    http: 500,
    message:
      "Not sent: the record no longer held the plan's before-values of the fields this row changes (someone edited it since the plan); re-plan to send it",
  },
  PLAN_NOT_FOUND: {
    exit: EXIT.USAGE,
    http: 404,
    message: 'No plan with that id exists (or it expired and was removed)',
  },
  APPROVAL_REQUIRED: {
    exit: EXIT.USAGE,
    http: 409,
    message:
      'The workspace requires approval ("requireApproval": true) and this would write values no approved plan holds (an import, a retry from a corrected file); nothing was sent, and the message names the commands that plan, approve and apply it',
  },
  PLAN_REFUSED: {
    exit: EXIT.USAGE,
    http: 409,
    message:
      'The plan cannot be applied (or approved, or discarded) in its state: unapproved where approval is required, expired, discarded, or already applied; nothing was sent',
  },
  CREATE_UNCERTAIN: {
    exit: EXIT.INTERNAL,
    http: 500,
    message:
      'A create may have been applied but its deal could not be told apart, or not looked for before its attempts ran out; it is never re-sent blindly (runs retry looks again)',
  },
  CREATE_CONFLICT: {
    exit: EXIT.INTERNAL,
    http: 500,
    message: 'The CRM named a deal that another row had already recorded as its own',
  },
  JOB_LOST: {
    exit: EXIT.INTERNAL,
    http: 500,
    message: "The worker lost its job (lock expired, e.g. cut off from Redis); the job's new owner sends the rows",
  },
  DASHBOARD_BUSY: {
    exit: EXIT.INTERNAL,
    http: 503,
    message:
      'The dashboard is already doing as many searches, downloads or uploads at once as it allows; try again in a moment',
  },
  DB_UNREACHABLE: {
    exit: EXIT.INTERNAL,
    http: 500,
    message:
      'The database a query source reads cannot be reached, refused the login, or dropped the connection; the message names where (never the password)',
  },
  DB_QUERY: {
    exit: EXIT.USAGE,
    http: 500,
    message: "A query source's SQL failed in the database (a syntax error, an unknown table or column, no permission)",
  },
  // 499: nobody reads it, the client is gone (nginx's "client closed request").
  CLIENT_GONE: {
    exit: EXIT.INTERNAL,
    http: 499,
    message: 'The client closed the connection before the dashboard had answered, so the work for it was stopped',
  },
} as const satisfies Record<string, ErrorEntry>;

export type ErrorCode = keyof typeof ERRORS;

const CODES = Object.keys(ERRORS) as ErrorCode[];

/** The registry's entry of a code. */
export function errorEntry(code: ErrorCode): ErrorEntry {
  return ERRORS[code];
}

/** Each code's meaning (the library's long-standing view of the registry). */
export const ERROR_CODES: Readonly<Record<ErrorCode, string>> = Object.fromEntries(
  CODES.map((code) => [code, ERRORS[code].message]),
) as Record<ErrorCode, string>;

/** The codes a person can fix in what they typed or set up: the CLI exits with the usage code for these. */
export const USER_ERROR_CODES: ReadonlySet<ErrorCode> = new Set(CODES.filter((c) => ERRORS[c].exit === EXIT.USAGE));
