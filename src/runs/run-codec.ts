import { z } from 'zod';
import { RUN_OPERATIONS } from '../crm/light.js';
import type { RunOptions, RunRecord } from './run-types.js';
import { RUN_STATUSES } from '../keys/index.js';

/*
 * A run is one Redis hash of flat string fields so the Lua scripts can HINCRBY counts and
 * flip the status in place; structured fields (columns, options) are JSON strings.
 */

const RunOptionsSchema = z.object({
  label: z.string().optional(),
  format: z.enum(['csv', 'ndjson', 'json']).optional(),
  delimiter: z.string().optional(),
  bom: z.boolean().optional(),
  lineEnding: z.enum(['\r\n', '\n']).optional(),
  ignoreUnknownColumns: z.boolean().optional(),
  mapping: z.unknown().optional(),
  dryRun: z.boolean().optional(),
  reconcile: z.boolean().optional(),
  matchKey: z.string().optional(),
  plan: z.string().optional(),
  inviteBatchSize: z.number().optional(),
  rowsPerJob: z.number().optional(),
  query: z
    .object({
      urlEnv: z.string().optional(),
      urlFile: z.string().optional(),
      query: z.string(),
      keyColumn: z.string().optional(),
    })
    .optional(),
  sourceSize: z.number().optional(),
  sourceMtimeMs: z.number().optional(),
  undoOf: z.string().optional(),
  held: z.object({ planId: z.string().optional(), rows: z.number() }).optional(),
}) satisfies z.ZodType<RunOptions>;

const Count = z.coerce.number().int();

/** The run hash as stored. Unknown fields are ignored so later additions stay readable. */
const ColumnsSchema = z.array(z.string());

const RunHashSchema = z.object({
  id: z.string(),
  workspace: z.string(),
  operation: z.enum(RUN_OPERATIONS),
  source: z.string(),
  syncName: z.string().optional(),
  /** Undo runs of this run, space-separated (RunStore.linkUndo appends). */
  undoneBy: z.string().optional(),
  status: z.enum(RUN_STATUSES),
  columns: z.string().default('[]'),
  options: z.string().default('{}'),
  createdAt: z.string(),
  finishedAt: z.string().optional(),
  firstFinishedAt: z.string().optional(),
  reason: z.string().optional(),
  producerDone: z.string().default('0'),
  producerSeenAt: z.string().optional(),
  total: Count.default(0),
  queued: Count.default(0),
  succeeded: Count.default(0),
  failed: Count.default(0),
  skipped: Count.default(0),
  invalid: Count.default(0),
  superseded: Count.default(0),
  uncertain: Count.default(0),
  drifted: Count.default(0),
  cancelled: Count.default(0),
  maxRow: Count.default(0),
  producedRow: Count.default(0),
  passStartedAt: z.string().optional(),
  activeMs: Count.default(0),
  passes: Count.default(0),
});

export interface DecodedRun {
  record: RunRecord;
  /** Highest row number with a recorded result (bounds result iteration). */
  maxRow: number;
}

export function encodeRun(run: RunRecord): Record<string, string> {
  const hash: Record<string, string> = {
    id: run.id,
    workspace: run.workspace,
    operation: run.operation,
    source: run.source,
    status: run.status,
    columns: JSON.stringify(run.columns),
    options: JSON.stringify(run.options),
    createdAt: run.createdAt,
    createdMs: String(Date.parse(run.createdAt)),
    producerDone: run.producerDone ? '1' : '0',
    total: String(run.counts.total),
    queued: String(run.counts.queued),
    succeeded: String(run.counts.succeeded),
    failed: String(run.counts.failed),
    skipped: String(run.counts.skipped),
    invalid: String(run.counts.invalid),
    superseded: String(run.counts.superseded),
    uncertain: String(run.counts.uncertain),
    drifted: String(run.counts.drifted),
    cancelled: String(run.counts.cancelled),
    maxRow: '0',
  };
  if (run.syncName !== undefined) hash.syncName = run.syncName;
  if (run.finishedAt !== undefined) hash.finishedAt = run.finishedAt;
  if (run.reason !== undefined) hash.reason = run.reason;
  if (run.producerSeenAt !== undefined) hash.producerSeenAt = run.producerSeenAt;
  return hash;
}

export function decodeRun(hash: Record<string, string>): DecodedRun {
  const h = RunHashSchema.parse(hash);
  const record: RunRecord = {
    id: h.id,
    workspace: h.workspace,
    operation: h.operation,
    source: h.source,
    status: h.status,
    counts: {
      total: h.total,
      queued: h.queued,
      succeeded: h.succeeded,
      failed: h.failed,
      skipped: h.skipped,
      invalid: h.invalid,
      superseded: h.superseded,
      uncertain: h.uncertain,
      drifted: h.drifted,
      cancelled: h.cancelled,
    },
    columns: ColumnsSchema.parse(JSON.parse(h.columns)),
    options: RunOptionsSchema.parse(JSON.parse(h.options)),
    createdAt: h.createdAt,
    producerDone: h.producerDone === '1',
    producedRow: h.producedRow,
    activeMs: h.activeMs,
    passes: h.passes,
  };
  if (h.syncName !== undefined) record.syncName = h.syncName;
  if (h.undoneBy !== undefined && h.undoneBy.trim() !== '') record.undoneBy = h.undoneBy.trim().split(' ');
  if (h.finishedAt !== undefined) record.finishedAt = h.finishedAt;
  if (h.firstFinishedAt !== undefined) record.firstFinishedAt = h.firstFinishedAt;
  if (h.reason !== undefined) record.reason = h.reason;
  if (h.producerSeenAt !== undefined) record.producerSeenAt = h.producerSeenAt;
  if (h.passStartedAt !== undefined) record.passStartedAt = h.passStartedAt;
  return { record, maxRow: h.maxRow };
}

/**
 * The counters an archive's run record may lack: archives written before they were always in the
 * record left them out at 0 (docs/architecture.md, "A run's life"). Every other field is as written.
 */
const ArchivedCountersSchema = z.object({
  producedRow: z.number().int().default(0),
  activeMs: z.number().int().default(0),
  passes: z.number().int().default(0),
});

/** A run record read back from its archive's first line (run-archive.ts), its counters filled. */
export function decodeArchivedRun(run: unknown): RunRecord {
  return { ...(run as RunRecord), ...ArchivedCountersSchema.parse(run) };
}
