import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { RECONCILE_OPERATIONS } from '../crm/index.js';
import { importKey, importMappingKey, importOfPlanKey, workspaceImportsKey } from '../keys/index.js';
import type { RedisClient } from '../redis/index.js';

/*
 * A browser import (issue 45): the uploaded file, the mapping, the check of every row, the plan
 * and the run, kept together under one id so the import's page shows them side by side and the
 * workspace's imports can be listed. JSON under `<p>:ws:{<w>}:import:<id>` (key-layout.ts); the
 * record outlives its file (RECORD_TTL_MS), which is removed from disk when the plan expires.
 */

/** How long an import is listed in the history (its file is long gone by then). */
export const RECORD_TTL_MS = 30 * 24 * 3600 * 1000;
/** How long the mapping used for a header set is offered again. */
const MAPPING_TTL_SECONDS = 180 * 24 * 3600;
/** Imports listed per workspace on the history page. */
export const HISTORY_SHOWN = 100;

export const IMPORT_ID = /^imp-[0-9a-z]{8,11}-[A-Za-z0-9_-]{8}$/;

/** One cause of invalid rows, grouped as the run page groups problems (masked message). */
const CheckGroupSchema = z.object({
  key: z.string(),
  code: z.string(),
  message: z.string(),
  count: z.number().int(),
  rows: z.array(z.number().int()),
});

const InvalidCellSchema = z.object({
  row: z.number().int(),
  line: z.number().int(),
  column: z.string(),
  reason: z.string(),
});

const TaskBase = {
  state: z.enum(['running', 'done', 'failed']),
  /** Which try of the task this is: a newer one started meanwhile makes the older's writes no-ops. */
  token: z.string(),
  startedMs: z.number(),
  updatedMs: z.number(),
  error: z.string().optional(),
};

const CheckSchema = z.object({
  ...TaskBase,
  rows: z.number().int().default(0),
  bytesRead: z.number().default(0),
  totalBytes: z.number().default(0),
  valid: z.number().int().optional(),
  invalid: z.number().int().optional(),
  groups: z.array(CheckGroupSchema).default([]),
  /** Invalid rows' causes beyond the groups kept. */
  otherRows: z.number().int().default(0),
  firstInvalid: z.array(InvalidCellSchema).default([]),
});

const PlanTaskSchema = z.object({
  ...TaskBase,
  pages: z.number().int().default(0),
  planId: z.string().optional(),
});

export const ImportRecordSchema = z.object({
  id: z.string(),
  workspace: z.string(),
  /** Who uploaded it (`dashboard:session-…`, as plans name approvers). */
  by: z.string(),
  createdAt: z.string(),
  createdMs: z.number(),
  /** When the file is removed from disk: the plan's expiry once there is a plan. */
  expiresMs: z.number(),
  fileName: z.string(),
  /** Where the file is on the dashboard's disk (never served). */
  filePath: z.string(),
  bytes: z.number(),
  fileRemoved: z.boolean().default(false),
  op: z.enum(RECONCILE_OPERATIONS),
  /** "How records are found": a match key of the operation's resource, or id. */
  matchKey: z.string(),
  columns: z.array(z.string()),
  /** The first values of each column, as read. */
  samples: z.record(z.string(), z.array(z.string())),
  /** The mapping as the CLI takes it (`--mapping`), once one was chosen. */
  mapping: z.unknown().optional(),
  check: CheckSchema.optional(),
  plan: PlanTaskSchema.optional(),
  runId: z.string().optional(),
  discarded: z.object({ at: z.string(), by: z.string() }).optional(),
});
export type ImportRecord = z.infer<typeof ImportRecordSchema>;
export type ImportCheck = z.infer<typeof CheckSchema>;
export type ImportPlanTask = z.infer<typeof PlanTaskSchema>;
export type CheckGroup = z.infer<typeof CheckGroupSchema>;
export type InvalidCell = z.infer<typeof InvalidCellSchema>;

export function newImportId(): string {
  return `imp-${Date.now().toString(36)}-${randomBytes(6).toString('base64url')}`;
}

export function newTaskToken(): string {
  return randomBytes(6).toString('base64url');
}

/** A header set's name: the same columns in any order are the same set. */
export function headerHash(columns: readonly string[]): string {
  return createHash('sha1')
    .update(JSON.stringify([...columns].sort()))
    .digest('hex');
}

export class ImportStore {
  readonly #redis: RedisClient;
  readonly #prefix: string;

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  async save(record: ImportRecord, isNew = false): Promise<void> {
    const key = importKey(this.#prefix, record.workspace, record.id);
    const ttl = Math.max(1, Math.ceil((record.createdMs + RECORD_TTL_MS - Date.now()) / 1000));
    if (isNew) {
      await this.#redis
        .multi()
        .set(key, JSON.stringify(record), 'EX', ttl)
        .zadd(workspaceImportsKey(this.#prefix, record.workspace), record.createdMs, record.id)
        .exec();
    } else await this.#redis.set(key, JSON.stringify(record), 'EX', ttl);
  }

  async get(workspace: string, id: string): Promise<ImportRecord | null> {
    if (!IMPORT_ID.test(id)) return null;
    const raw = await this.#redis.get(importKey(this.#prefix, workspace, id));
    if (raw === null) return null;
    const parsed = ImportRecordSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  }

  /** Per import key, the tail of its updates in this process (update). */
  readonly #updating = new Map<string, Promise<unknown>>();

  /**
   * Reads, changes and writes the record; `change` returns whether it changed anything (false:
   * nothing written). Two writers of one import (a task's progress, a person's post) touch
   * different parts of it, but each writes the whole record: unserialised, a task that read
   * before a post and wrote after it put the post's mapping back (seen in CI). So one import's
   * updates run one after another — its tasks and its posts are in one dashboard process, the
   * one holding its file (docs/dashboard.md: several dashboards need sticky sessions).
   */
  async update(workspace: string, id: string, change: (record: ImportRecord) => boolean): Promise<ImportRecord | null> {
    const key = importKey(this.#prefix, workspace, id);
    const run = (this.#updating.get(key) ?? Promise.resolve()).then(async () => {
      const record = await this.get(workspace, id);
      if (record === null) return null;
      if (change(record) === false) return record;
      await this.save(record);
      return record;
    });
    const tail = run.catch(() => undefined);
    this.#updating.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.#updating.get(key) === tail) this.#updating.delete(key);
    }
  }

  /** The workspace's imports, newest first; ids whose record expired leave the list. */
  async list(workspace: string, limit = HISTORY_SHOWN): Promise<ImportRecord[]> {
    const listKey = workspaceImportsKey(this.#prefix, workspace);
    const ids = await this.#redis.zrevrange(listKey, 0, limit - 1);
    const found = await Promise.all(ids.map((id) => this.get(workspace, id)));
    const gone = ids.filter((_, i) => found[i] === null);
    if (gone.length > 0) await this.#redis.zrem(listKey, ...gone);
    return found.filter((r): r is ImportRecord => r !== null);
  }

  async linkPlan(record: ImportRecord, planId: string): Promise<void> {
    const ttl = Math.max(1, Math.ceil((record.createdMs + RECORD_TTL_MS - Date.now()) / 1000));
    await this.#redis.set(importOfPlanKey(this.#prefix, record.workspace, planId), record.id, 'EX', ttl);
  }

  /** The import a plan was made for, if it was made in the browser. */
  async ofPlan(workspace: string, planId: string): Promise<ImportRecord | null> {
    const id = await this.#redis.get(importOfPlanKey(this.#prefix, workspace, planId));
    return id === null ? null : this.get(workspace, id);
  }

  async rememberMapping(workspace: string, columns: readonly string[], mapping: unknown): Promise<void> {
    await this.#redis.set(
      importMappingKey(this.#prefix, workspace, headerHash(columns)),
      JSON.stringify(mapping),
      'EX',
      MAPPING_TTL_SECONDS,
    );
  }

  async rememberedMapping(workspace: string, columns: readonly string[]): Promise<unknown> {
    const raw = await this.#redis.get(importMappingKey(this.#prefix, workspace, headerHash(columns)));
    return raw === null ? undefined : (JSON.parse(raw) as unknown);
  }
}
