import type { InviteOptions, Operation, OperationPayload } from '../crm/index.js';

/**
 * The round of a run's first production (its generation): rows it queues carry no round, and a
 * retry's rows carry the retry's generation, so only that round's job may write their results.
 */
export const FIRST_ROUND = 0;

/** A row's retry round: one queued without a round is of its run's first production. */
export function roundOf(row: { round?: number }): number {
  return row.round ?? FIRST_ROUND;
}

/** A planned create's window (QueuedRow.planned): from the plan's making (Redis clock, ms). */
export interface PlannedWindow {
  madeAt: number;
  /**
   * When the apply began (Redis clock, ms), for a create whose plan creates another deal of the
   * same name: deals made later may be that row's, so only deals made before count. Default:
   * none (every deal like it made since the plan counts; the row's own never, see RowSender).
   */
  until?: number;
}

/** What one row of an update or create sends: one request. */
export type RowPayload = Exclude<OperationPayload, { op: 'team.invite' }>;

/** One input row of an update or create. Never holds the API key. */
export interface QueuedRow {
  row: number;
  line: number;
  /** The source row's key (a database source's key column), recorded with the result. */
  ref?: string;
  payload: RowPayload;
  /** The row as read, carried only while in flight so a failure result can be exported and fixed. */
  original: Record<string, string>;
  /**
   * What the row's result says beside its outcome: fields left out by a mapping's
   * `"onUnknown": "skip-field"` (a name, lookup key or value nothing resolved). Default none.
   */
  note?: string;
  /** Retry round (the retry's job generation) when `runs retry` queued the row. Default FIRST_ROUND. */
  round?: number;
  /**
   * The row's place in its records' write order when it is not its run's: `runs retry
   * --resend-superseded` gives its rows a new place after every earlier write, so they become
   * the records' latest (resendPlace: a place after every earlier write, naming the run). Default: the row's run.
   */
  orderAs?: string;
  /**
   * A row of an applied plan (`crm-sync apply`) or of a reconciled import (`import --reconcile`,
   * a sync's tick): the CRM's values, canonical, of the fields it changes when the plan (or the
   * run's index) read them. The worker sends it only while the record still holds them, and holds
   * each field it sends unchanged (a deal's required name) to the value sent (the drift check);
   * otherwise the row ends `drifted`. Default: no check.
   */
  expect?: Record<string, string>;
  /**
   * With `expect`: the record's place in the CRM's list when planned (0-based). The drift check
   * reads the one page that held it rather than the whole list, while that page still holds it.
   * Default: none (the whole list is read).
   */
  listPlace?: number;
  /**
   * With `expect`: a row of an undo run (`runs undo`), whose `expect` is what the undone run
   * wrote. A record no longer holding it was changed since the run (a person, a later run): the
   * row is left alone and ends `skipped` "changed since the run" with the value now, as the
   * undo's plan records such a field; not `drifted`. Default: an applied plan's row.
   */
  undo?: true;
  /**
   * A reconciled row queued by a version before reconciled rows carried `expect`: the CRM's
   * values of the fields it changes when the run read them, kept with its result for `runs
   * undo`; never checked. Read only (rows waiting in a queue across an upgrade); nothing writes
   * it now. Default: a plain import's row, whose before-values the worker reads from a list page.
   */
  before?: Record<string, string>;
  /**
   * A create of an applied plan: when the plan was made (Redis clock, ms). The worker sends it
   * only while no deal holds its match key and none like it was made since (the drift check of
   * a create); otherwise the row ends `drifted`. Default: no check.
   */
  planned?: PlannedWindow;
}

/**
 * Rows of one run and one operation, sent one request each, in order. Updates travel several
 * to a job (the workspace's `rowsPerJob`): BullMQ's per-job work is shared by the rows.
 * Creates travel alone, so a create's attempt counters are its own.
 */
export interface RowBatchJobData {
  runId: string;
  rows: QueuedRow[];
}

export interface InviteRow {
  row: number;
  line: number;
  /** See QueuedRow.ref. */
  ref?: string;
  email: string;
  original: Record<string, string>;
  /** See QueuedRow.round. Default FIRST_ROUND. */
  round?: number;
}

/** Many invite rows sharing the same options, sent as one team-members request. */
export interface InviteBatchJobData {
  runId: string;
  rows: InviteRow[];
  options: InviteOptions;
}

export type SyncJobData = RowBatchJobData | InviteBatchJobData;
export type SyncJobName = Operation;

/** One row per job, as queued before rows shared jobs; a paused queue can hold them across an upgrade. */
export interface LegacyRowJobData extends QueuedRow {
  runId: string;
}

/** What a queue may hold: today's shapes, and the one-row shape of earlier versions. */
export type StoredJobData = SyncJobData | LegacyRowJobData;

/** Today's shape of any job data read from the queue. */
export function toJobData(data: StoredJobData): SyncJobData {
  if ('rows' in data) return data;
  const { runId, row, line, payload, original } = data;
  return { runId, rows: [{ row, line, payload, original }] };
}

export function isInviteBatch(data: SyncJobData): data is InviteBatchJobData {
  return 'options' in data;
}
