import type { InviteOptions, Operation, OperationPayload } from '../crm/index.js';

/** One input row, one request. Never holds the API key. */
export interface RowJobData {
  runId: string;
  row: number;
  line: number;
  payload: Exclude<OperationPayload, { op: 'team.invite' }>;
  /** The row as read, carried only while in flight so a failure result can be exported and fixed. */
  original: Record<string, string>;
}

export interface InviteRow {
  row: number;
  line: number;
  email: string;
  original: Record<string, string>;
}

/** Many invite rows sharing the same options, sent as one team-members request. */
export interface InviteBatchJobData {
  runId: string;
  rows: InviteRow[];
  options: InviteOptions;
}

export type SyncJobData = RowJobData | InviteBatchJobData;
export type SyncJobName = Operation;

export function isInviteBatch(data: SyncJobData): data is InviteBatchJobData {
  return Array.isArray((data as InviteBatchJobData).rows);
}
