/**
 * Every error code crm-sync can produce, in one registry (fastify's lib/errors.js habit).
 * Codes are stable strings: scripts, exports and the dashboard match on them, so a code is
 * never renamed once shipped. The text is the short meaning shown next to a code in docs.
 */
export const ERROR_CODES = {
  USAGE: 'A command was called with arguments that do not fit',
  CONFIG_NOT_FOUND: 'The configuration file does not exist',
  CONFIG_INVALID: 'The configuration file or environment is invalid',
  SECRET_MISSING: "A workspace's API key could not be read from its env variable or file",
  WORKSPACE_UNKNOWN: 'The named workspace is not in the configuration',
  CRM_AUTH: 'The CRM refused the API key (401)',
  CRM_RATE_LIMITED: 'The CRM asked us to slow down (429)',
  CRM_TRANSIENT: 'The CRM or the network failed in a way that may pass (5xx, timeout, reset)',
  CRM_NOT_FOUND: 'The CRM has no record with that id (404)',
  CRM_REJECTED: 'The CRM rejected the request (4xx)',
  CRM_BAD_RESPONSE: 'The CRM answered with a body that does not match the spec',
  INPUT_UNREADABLE: 'The input file cannot be opened or read',
  INPUT_ENCODING: 'The input file is not UTF-8',
  INPUT_PARSE: 'The input file is malformed at a line',
  INPUT_TOO_LARGE: 'A row or field exceeds the size limits',
  MAPPING_INVALID: 'The column mapping file is invalid',
  INPUT_COLUMNS: 'The file has columns that map to no field, or lacks a column the mapping names; nothing was sent',
  INPUT_EMPTY: 'The input file is empty',
  ROW_INVALID: 'A row does not satisfy the operation schema',
  RUN_NOT_FOUND: 'No run with that id exists',
  RUN_STATE: 'The run is not in a state that allows this action',
  REDIS_UNAVAILABLE: 'Redis cannot be reached',
  REDIS_EVICTS:
    'Redis is set to evict keys (maxmemory-policy): queued jobs and results could vanish, so crm-sync will not start',
  REDIS_CLUSTER: 'REDIS_URL points at a Redis Cluster node: name the cluster with REDIS_CLUSTER_NODES instead',
  REDIS_LAYOUT:
    "The keys under the prefix are in a layout this version cannot use (a newer version's, or a migration in progress)",
  REDIS_FULL:
    'Redis stayed full (maxmemory) longer than --redis-outage while a run was produced; nothing more was sent, and `runs resume` goes on (exit 5)',
  REDIS_LOST: 'Redis stopped answering while a command followed a run; the run itself goes on in the workers',
  REDIS_DATA_LOST:
    "Redis lost a run's data while it was under way (restarted without persistence, flushed, or keys evicted); the message says how many rows were sent before and how to send the rest without duplicates",
  SYNC_DEFINITION_INVALID: 'A sync definition in jobs/ is invalid',
  SYNC_NOT_FOUND: 'No sync definition with that name exists',
  RECONCILE_AMBIGUOUS: 'A match key fits several CRM records (or repeats in the file); the row was not sent',
  REFERENCE_UNKNOWN:
    "A cell names a pipeline, stage, tag or company the CRM's records do not show (or a lookup key or value its mapping does not have); the row was not sent",
  REFERENCE_AMBIGUOUS:
    'A cell names several pipelines, stages, tags or companies (a stage name two pipelines share); the row was not sent',
  RUN_ABORTED: 'The run was stopped (too many failed rows) before this row was sent',
  RUN_CANCELLED: 'The run was cancelled (runs cancel) before this row was sent; runs retry sends it',
  RESULT_UNREADABLE: 'A stored row result cannot be decoded (written by an incompatible version?)',
  ROW_SUPERSEDED:
    'Not sent: later rows wrote every field this row would change and were applied first, so its older values must not follow them',
  ROW_WRITTEN_LATER:
    'Not sent again by a retry: later runs had written every field this row would change (runs retry --resend-superseded sends it as a new write)',
  ROW_DRIFTED:
    "Not sent: the record no longer held the plan's before-values of the fields this row changes (someone edited it since the plan); re-plan to send it",
  PLAN_NOT_FOUND: 'No plan with that id exists (or it expired and was removed)',
  APPROVAL_REQUIRED:
    'The workspace requires approval ("requireApproval": true) and this would write values no approved plan holds (an import, a retry from a corrected file); nothing was sent, and the message names the commands that plan, approve and apply it',
  PLAN_REFUSED:
    'The plan cannot be applied (or approved, or discarded) in its state: unapproved where approval is required, expired, discarded, or already applied; nothing was sent',
  CREATE_UNCERTAIN:
    'A create may have been applied but its deal could not be told apart, or not looked for before its attempts ran out; it is never re-sent blindly (runs retry looks again)',
  CREATE_CONFLICT: 'The CRM named a deal that another row had already recorded as its own',
  JOB_LOST: "The worker lost its job (lock expired, e.g. cut off from Redis); the job's new owner sends the rows",
  DASHBOARD_BUSY:
    'The dashboard is already doing as many searches, downloads or uploads at once as it allows; try again in a moment',
  DB_UNREACHABLE:
    'The database a query source reads cannot be reached, refused the login, or dropped the connection; the message names where (never the password)',
  DB_QUERY: "A query source's SQL failed in the database (a syntax error, an unknown table or column, no permission)",
  CLIENT_GONE: 'The client closed the connection before the dashboard had answered, so the work for it was stopped',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * Errors the person running a command can fix in what they typed or set up (arguments, config,
 * keys, input files, run ids): the CLI exits with the usage code for these, the internal code
 * for the rest.
 */
export const USER_ERROR_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'USAGE',
  'CONFIG_INVALID',
  'CONFIG_NOT_FOUND',
  'SECRET_MISSING',
  'WORKSPACE_UNKNOWN',
  'INPUT_UNREADABLE',
  'INPUT_ENCODING',
  'INPUT_PARSE',
  'INPUT_TOO_LARGE',
  'MAPPING_INVALID',
  'INPUT_COLUMNS',
  'INPUT_EMPTY',
  'DB_QUERY',
  'RUN_NOT_FOUND',
  'RUN_STATE',
  'PLAN_NOT_FOUND',
  'PLAN_REFUSED',
  'APPROVAL_REQUIRED',
  'SYNC_DEFINITION_INVALID',
  'SYNC_NOT_FOUND',
  'REDIS_EVICTS',
  'REDIS_CLUSTER',
]);
