import type { RunOperation } from '../crm/index.js';
import type { RUN_STATUSES } from '../keys/index.js';
import type { FieldError } from '../ingest/index.js';

/**
 * A run's lifecycle. `blocked`: the CRM refused the API key; rows wait in the queue.
 * `cancelled`: an operator stopped it (`runs cancel`); rows still waiting were recorded
 * `cancelled`, rows in flight finished.
 */
export type RunStatus = (typeof RUN_STATUSES)[number];

/**
 * A row's final result. Every input row ends with exactly one of these.
 * `superseded`: not sent, because later rows wrote every field it would change and were
 * applied first (sending it now would put older values back; write order is per field). `uncertain`: a create whose outcome could not be
 * established (it may have been applied); it is never re-sent blindly: `runs retry` looks again.
 * `cancelled`: not sent because the run was cancelled; exported and retryable like a failure.
 * `drifted`: a row of an applied plan, not sent because its record no longer held the plan's
 * before-values of the fields it changes (someone edited it since the plan); re-plan to send it.
 */
export type FinalRowStatus = (typeof FINAL_ROW_STATUSES)[number];

/**
 * Every final result kind, as a value: pages, counts and metrics walk this list, so a kind added
 * here (and to RunCounts, which must name each) is shown everywhere counts are shown.
 */
export const FINAL_ROW_STATUSES = [
  'succeeded',
  'skipped',
  'failed',
  'invalid',
  'uncertain',
  'superseded',
  'drifted',
  'cancelled',
] as const;

export interface RunCounts extends Record<FinalRowStatus, number> {
  /** Rows read from the source so far (final once `producerDone`). */
  total: number;
  /** Rows handed to the queue and still waiting for a final result. */
  queued: number;
  succeeded: number;
  failed: number;
  skipped: number;
  invalid: number;
  superseded: number;
  uncertain: number;
  /** Not sent: the record no longer held the plan's before-values (`crm-sync apply`). */
  drifted: number;
  cancelled: number;
}

/** A run's counts before its first row: every kind at 0. */
export function emptyCounts(): RunCounts {
  const counts = { total: 0, queued: 0 } as RunCounts;
  for (const kind of FINAL_ROW_STATUSES) counts[kind] = 0;
  return counts;
}

/** How the run was made, kept so retries can map and validate rows the same way. */
export interface RunOptions {
  /** A short name given at import (`import --name`): what lists and pages call the run. */
  label?: string;
  format?: 'csv' | 'ndjson' | 'json';
  delimiter?: string;
  /** A CSV source's BOM and line ends (SourceFacts): its exports are written the same way. */
  bom?: boolean;
  lineEnding?: '\r\n' | '\n';
  /** Columns that map to no field were skipped, not refused (--ignore-unknown-columns). */
  ignoreUnknownColumns?: boolean;
  /** The mapping file's content (not its path: the file may change or vanish). */
  mapping?: unknown;
  dryRun?: boolean;
  reconcile?: boolean;
  /** The plan this run applies (`crm-sync apply`): its rows are the plan's writes. */
  plan?: string;
  /** An undo run (`runs undo`): the run whose writes it puts back. */
  undoOf?: string;
  matchKey?: string;
  inviteBatchSize?: number;
  /** Update rows per queue job, so a retry batches rows the same way. */
  rowsPerJob?: number;
  /**
   * A database run: where its rows came from (the URL's env variable or file, never the URL;
   * the query; the key column naming each row). Absent for file runs.
   */
  query?: { urlEnv?: string; urlFile?: string; query: string; keyColumn?: string };
  /** Size and modification time of the source file when the run began: a resume refuses a changed file. */
  sourceSize?: number;
  sourceMtimeMs?: number;
  /**
   * A nightly sync's tick held for approval: nothing was read into this run or sent; its rows are
   * the plan's (`rows`, the source's data rows). Pages and `runs show` name the plan and its state
   * now (pending, or applied as another run), not the words of the moment it was held.
   */
  held?: { planId?: string; rows: number };
}

export interface RunRecord {
  id: string;
  workspace: string;
  operation: RunOperation;
  /** Source file path or a label (e.g. `retry of <id>`). */
  source: string;
  /** Set for runs started by a nightly sync definition. */
  syncName?: string;
  /** Undo runs of this run (`runs undo`), oldest first. */
  undoneBy?: string[];
  status: RunStatus;
  counts: RunCounts;
  /** Column names of the source, in file order (CSV header, or keys seen in JSON rows). */
  columns: string[];
  options: RunOptions;
  createdAt: string;
  finishedAt?: string;
  /** When the run first completed or failed; retries move finishedAt, never this. */
  firstFinishedAt?: string;
  /** Why the run is blocked or failed, in plain words. */
  reason?: string;
  /** True once the producer has read the whole source: `total` is final. */
  producerDone: boolean;
  /**
   * Last sign of life from the process reading the source (ISO), renewed every few seconds
   * while it produces. A run whose producer went silent was cut off (the process died).
   */
  producerSeenAt?: string;
  /** The highest row the producer handed to the queue (0: none yet): a resumed producer goes on after it. */
  producedRow: number;
  /**
   * Durations apart from wall time: a retry or resume starts a new pass. `passStartedAt` is when
   * the current pass began (absent: createdAt), `activeMs` the time earlier passes took from
   * their start to their end (0 before a second pass), `passes` how many passes came after the
   * first (0: none).
   */
  passStartedAt?: string;
  activeMs: number;
  passes: number;
}

/** Moved to ingest/ (where rows are decoded); re-exported so the run store's users need no change. */
export type { FieldError } from '../ingest/index.js';

/** Per field, [before, after] in canonical text (src/reconcile/compare.ts); before null: not known. */
export type FieldChanges = Record<string, [before: string | null, after: string]>;

export interface RowResult {
  /** 1-based data row number (the header is not a row). */
  row: number;
  /** 1-based line in the source file where the row starts (differs from row with quoted newlines). */
  line?: number;
  /** The source row's key (a database run's key column value): shown where a file run shows the line. */
  ref?: string;
  status: FinalRowStatus;
  recordId?: string;
  httpStatus?: number;
  /** Stable error code (see src/errors) for failed and invalid rows. */
  code?: string;
  message?: string;
  /** Field-level reasons for invalid rows. */
  errors?: FieldError[];
  /** The row as read from the source, so failed rows can be exported, fixed and re-imported. */
  original?: Record<string, string>;
  /** A succeeded row's sent fields as a compact digest, for `verify` (src/reconcile/sent-digest.ts). */
  sent?: string;
  /**
   * A succeeded row's writes, field by field: the CRM's value before (canonical; null when it is
   * not known: a create, or a field the CRM does not report) and the value written. An update
   * keeps the fields it changed, a create every field it sent. What `runs undo` puts back.
   */
  changes?: FieldChanges;
  /** When the result was recorded (ISO). */
  at: string;
}

export interface CreateRunInput {
  workspace: string;
  operation: RunRecord['operation'];
  source: string;
  syncName?: string;
  columns?: string[];
  options?: RunOptions;
  /** Start in this status (a dry run is created `completed` when its producer is done). */
  status?: RunStatus;
  /** When the run began. Default now; benchmarks that simulate past nights set it. */
  createdAt?: Date;
}

export interface ListRunsQuery {
  status?: RunStatus;
  workspace?: string;
  syncName?: string;
  /** Newest first. Default 0 / 50. */
  offset?: number;
  limit?: number;
}
