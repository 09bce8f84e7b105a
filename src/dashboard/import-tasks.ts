import { DEFAULTS, getWorkspace } from '../config/index.js';
import { createCrmClient } from '../crm/index.js';
import { isCrmSyncError } from '../errors/index.js';
import { parseMapping, type LoadReferences, type Mapping } from '../ingest/index.js';
import { makePlan, type PlanStore } from '../plans/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { checkRows } from '../reconcile/index.js';
import { referenceStoreOf, workspaceReferenceLoader } from '../references/index.js';
import { problemGroupOf } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { withoutPaths } from './import-files.js';
import {
  newTaskToken,
  type CheckGroup,
  type ImportRecord,
  type ImportStore,
  type InvalidCell,
} from './import-store.js';

/** Causes of invalid rows kept, as the run page keeps (DEFAULTS.runs.maxGroups). */
const MAX_GROUPS = DEFAULTS.runs.maxGroups;
const GROUP_SAMPLE_ROWS = DEFAULTS.runs.groupSampleRows;
/** Invalid cells listed on the check page; the CSV has them all. */
export const FIRST_INVALID_SHOWN = 50;
/** A task that wrote no progress for this long died with its process: the page offers to start again. */
export const TASK_STALE_MS = 60_000;

export interface TaskDeps {
  runtime: Runtime;
  imports: ImportStore;
  plans: PlanStore;
}

/** The import's mapping, parsed as the CLI parses `--mapping` (MAPPING_INVALID with the reason). */
export function mappingOfImport(record: ImportRecord): { mapping: Mapping; raw: unknown } | undefined {
  if (record.mapping === undefined) return undefined;
  return { mapping: parseMapping(record.mapping, 'the mapping'), raw: record.mapping };
}

/** What a failure says to the person: a typed error's message without the server's paths. */
function failureText(err: unknown, record: ImportRecord): string {
  const text = isCrmSyncError(err) ? err.message : 'the dashboard failed (see its log)';
  return withoutPaths(text, record.filePath, record.fileName);
}

/** A mapping's names (`"by": "name"`) resolve from the workspace's references, as a plain import's do. */
export function referenceLoader(deps: Pick<TaskDeps, 'runtime'>, record: ImportRecord): LoadReferences {
  const { runtime } = deps;
  return workspaceReferenceLoader({
    config: runtime.config,
    workspace: record.workspace,
    redis: runtime.redis,
    logger: runtime.logger,
  });
}

/** The source options a check and a plan share: one file, one mapping, one way of finding records. */
export function sourceOptionsOf(record: ImportRecord) {
  const mapping = mappingOfImport(record);
  return {
    file: record.filePath,
    op: record.op,
    workspace: record.workspace,
    matchKey: record.matchKey,
    ...(mapping !== undefined ? { mapping } : {}),
  };
}

/**
 * Checks every row of the import's file with its mapping (checkRows: the plan's own rules, no
 * CRM read) and stores the counts, the causes grouped as the run page groups them (masked
 * values) and the first invalid cells. Runs after the request that started it has its answer.
 */
export async function startCheck(deps: TaskDeps, record: ImportRecord, release: () => void): Promise<void> {
  const token = newTaskToken();
  const now = Date.now();
  await deps.imports.update(record.workspace, record.id, (r) => {
    r.check = {
      state: 'running',
      token,
      startedMs: now,
      updatedMs: now,
      rows: 0,
      bytesRead: 0,
      totalBytes: r.bytes,
      groups: [],
      otherRows: 0,
      firstInvalid: [],
    };
    return true;
  });
  const ours = (r: ImportRecord) => r.check?.token === token;
  const beating = heartbeat(deps, record, 'check', token);
  void (async () => {
    const groups = new Map<string, CheckGroup>();
    const firstInvalid: InvalidCell[] = [];
    let otherRows = 0;
    try {
      const result = await checkRows({
        ...sourceOptionsOf(record),
        loadReferences: referenceLoader(deps, record),
        onInvalid: (row) => {
          const cause = problemGroupOf({ row: row.row, status: 'invalid', code: row.code, errors: row.errors, at: '' });
          let group = groups.get(cause.key);
          if (group === undefined && groups.size < MAX_GROUPS) {
            group = { key: cause.key, code: cause.code, message: cause.message, count: 0, rows: [] };
            groups.set(cause.key, group);
          }
          if (group === undefined) otherRows++;
          else {
            group.count++;
            if (group.rows.length < GROUP_SAMPLE_ROWS) group.rows.push(row.row);
          }
          for (const e of row.errors) {
            if (firstInvalid.length >= FIRST_INVALID_SHOWN) break;
            firstInvalid.push({ row: row.row, line: row.line, column: e.field, reason: e.message });
          }
        },
        onProgress: async (rows, bytesRead, totalBytes) => {
          await deps.imports.update(record.workspace, record.id, (r) => {
            if (!ours(r) || r.check === undefined) return false;
            Object.assign(r.check, { rows, bytesRead, totalBytes, updatedMs: Date.now() });
            return true;
          });
        },
      });
      const sorted = [...groups.values()].sort((a, b) => b.count - a.count || a.rows[0]! - b.rows[0]!);
      await deps.imports.update(record.workspace, record.id, (r) => {
        if (!ours(r) || r.check === undefined) return false;
        Object.assign(r.check, {
          state: 'done',
          updatedMs: Date.now(),
          rows: result.rows,
          valid: result.valid,
          invalid: result.invalid,
          groups: sorted,
          otherRows,
          firstInvalid,
        });
        r.columns = result.columns.length > 0 ? result.columns : r.columns;
        return true;
      });
    } catch (err) {
      if (!isCrmSyncError(err)) deps.runtime.logger.warn({ err, importId: record.id }, 'dashboard import check failed');
      await deps.imports
        .update(record.workspace, record.id, (r) => {
          if (!ours(r) || r.check === undefined) return false;
          Object.assign(r.check, { state: 'failed', updatedMs: Date.now(), error: failureText(err, record) });
          return true;
        })
        .catch(() => undefined);
    } finally {
      beating();
      release();
    }
  })();
}

/**
 * Makes the import's plan as `crm-sync plan` does (makePlan: list pages in the workspace's
 * budget, every row stored, nothing sent), counting the list pages read for the status page.
 */
export async function startPlan(
  deps: TaskDeps,
  record: ImportRecord,
  release: () => void,
  pageSize: number = DEFAULTS.client.pageSize,
): Promise<void> {
  const token = newTaskToken();
  const now = Date.now();
  await deps.imports.update(record.workspace, record.id, (r) => {
    r.plan = { state: 'running', token, startedMs: now, updatedMs: now, pages: 0 };
    return true;
  });
  const ours = (r: ImportRecord) => r.plan?.token === token;
  const { runtime } = deps;
  const beating = heartbeat(deps, record, 'plan', token);
  void (async () => {
    const ws = getWorkspace(runtime.config, record.workspace);
    const client = createCrmClient(runtime.config, record.workspace, runtime.logger);
    try {
      const budget = workspaceRequestBudget(runtime.redis, runtime.config, record.workspace, client);
      let pages = 0;
      const { plan } = await makePlan({
        ...sourceOptionsOf(record),
        store: deps.plans,
        client,
        budget: {
          take: async (signal?: AbortSignal) => {
            const taken = await budget.take(signal);
            pages++;
            // Progress is a page count: a write per page, not awaited by the read.
            void deps.imports
              .update(record.workspace, record.id, (r) => {
                if (!ours(r) || r.plan === undefined || r.plan.state !== 'running') return false;
                Object.assign(r.plan, { pages, updatedMs: Date.now() });
                return true;
              })
              .catch(() => undefined);
            return taken;
          },
        },
        settings: { planTtlMs: ws.planTtlMs, driftMaxAgeMs: ws.driftMaxAgeMs, rateLimit: ws.rateLimit },
        // As `crm-sync plan`: names in the mapping resolve from the workspace's shared references.
        references: {
          store: referenceStoreOf(runtime.config, record.workspace, runtime.redis),
          maxAgeMs: ws.referencesMaxAgeMs,
        },
        pageSize,
        logger: runtime.logger,
      });
      await deps.imports.linkPlan(record, plan.id);
      await deps.imports.update(record.workspace, record.id, (r) => {
        if (!ours(r) || r.plan === undefined) return false;
        Object.assign(r.plan, { state: 'done', updatedMs: Date.now(), planId: plan.id, pages });
        // The file lives as long as the plan that reads from it can be applied.
        r.expiresMs = Date.parse(plan.expiresAt);
        return true;
      });
    } catch (err) {
      if (!isCrmSyncError(err)) runtime.logger.warn({ err, importId: record.id }, 'dashboard import plan failed');
      await deps.imports
        .update(record.workspace, record.id, (r) => {
          if (!ours(r) || r.plan === undefined) return false;
          Object.assign(r.plan, { state: 'failed', updatedMs: Date.now(), error: failureText(err, record) });
          return true;
        })
        .catch(() => undefined);
    } finally {
      beating();
      client.close();
      release();
    }
  })();
}

/** Every so often while a task runs: its record says it is alive (a plan storing rows writes no progress). */
const HEARTBEAT_MS = 10_000;

function heartbeat(deps: TaskDeps, record: ImportRecord, task: 'check' | 'plan', token: string): () => void {
  const timer = setInterval(() => {
    void deps.imports
      .update(record.workspace, record.id, (r) => {
        const t = r[task];
        if (t === undefined || t.token !== token || t.state !== 'running') return false;
        t.updatedMs = Date.now();
        return true;
      })
      .catch(() => undefined);
  }, HEARTBEAT_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** A task still running by its record, but silent too long: its process is gone. */
export function isStale(task: { state: string; updatedMs: number } | undefined, now = Date.now()): boolean {
  return task !== undefined && task.state === 'running' && now - task.updatedMs > TASK_STALE_MS;
}
