import {
  planKey,
  planRowsKey,
  planWorkspacesKey,
  RESULT_BUCKET_ROWS,
  syncPlanKey,
  undoClaimKey,
  workspacePlansKey,
} from '../keys/index.js';
import type { ReconcileOperation } from '../crm/light.js';
import type { DialectFacts } from '../ingest/index.js';
import { CrmSyncError } from '../errors/index.js';
import { asOptionalString, asString, defineScript, kindReply, type RedisClient } from '../redis/index.js';
import { newRunId } from '../runs/light.js';
import { decodePlanRow, encodePlanRow } from './plan-codec.js';
import type { PlanCounts, PlanPrediction, PlanRecord, PlanRow, PlanStatus } from './plan-types.js';
import { DEFAULTS } from '../config/index.js';
import { countOf } from '../counts/index.js';

const asStatus = asString as (raw: unknown) => PlanStatus;

/** Approve, discard and apply-once, each one atomic step (src/redis/commands/move-plan-2.lua). */
const MOVE_PLAN = defineScript({
  file: 'move-plan-2',
  keys: ['planKey', 'claimKey'],
  args: ['action', 'by', 'required'],
  reply: kindReply({
    ok: { status: asStatus },
    refused: { why: asString as (raw: unknown) => PlanRefusal, status: asStatus, other: asOptionalString },
    missing: {},
  }),
});
/** An undo plan made the newest undo of its run (src/redis/commands/claim-undo-1.lua). */
const CLAIM_UNDO = defineScript({
  file: 'claim-undo-1',
  keys: ['claimKey'],
  args: ['planId', 'readMs', 'expireAt'],
  reply: kindReply({ ok: {}, undone: { taken: asString } }),
});

/** A plan's keys outlive its expiry by this much, so `plans show` can still say it expired (ms). */
export const PLAN_KEEP_MS = 24 * 60 * 60 * 1000;

/**
 * Rows written to Redis per round trip while planning. Rows waiting for their batch outlive a
 * young-generation GC or two and are promoted: 500 at a time grew a 100,000-row plan's old
 * space more than 100 do (bench/RESULTS.md, "Change control"), for 4 × the round trips (1,000).
 */
const WRITE_BATCH = 100;

export interface NewPlan {
  workspace: string;
  operation: ReconcileOperation;
  source: string;
  matchKey: string;
  /** The workspace's `planTtlMs`. */
  ttlMs: number;
  /** The nightly sync whose tick makes the plan. Default none. */
  syncName?: string;
  /** The run whose writes the plan puts back (`runs undo`). Default none. */
  undoOf?: string;
}

export interface PlanSummary {
  counts: PlanCounts;
  prediction: PlanPrediction;
  fields: string[];
  rows: number;
  /** The source file's CSV dialect (its exports follow it). */
  dialect?: DialectFacts;
}

/**
 * Why a plan cannot move: PLAN_REFUSED's `why`. An undo plan's own: `superseded` (a newer undo
 * plan of its run was made) and `undone` (another undo plan of its run was taken for applying
 * since it was made); `other` names that plan.
 */
export type PlanRefusal =
  'expired' | 'discarded' | 'applied' | 'applying' | 'unapproved' | 'pending' | 'approved' | 'superseded' | 'undone';

export type PlanMove =
  { ok: true; status: PlanStatus } | { ok: false; why: PlanRefusal; status: PlanStatus; other?: string };

/** "The undo of run X" as stored: the newest undo plan, and the undo plan last taken for applying. */
export interface UndoClaim {
  plan?: string;
  taken?: string;
}

/**
 * Stored plans (docs/architecture.md, "Change control"): a hash per plan, its rows in buckets of
 * RESULT_BUCKET_ROWS, all under the workspace's hash tag (src/keys/key-layout.ts). A plan's rows
 * are written while it is made and never change; its status moves only through MOVE_PLAN.
 */
export class PlanStore {
  readonly redis: RedisClient;
  readonly prefix: string;

  constructor(options: { redis: RedisClient; prefix?: string }) {
    this.redis = options.redis;
    this.prefix = options.prefix ?? 'crm-sync';
  }

  /** Starts a plan: rows go in with `add`, and the plan exists (is listed, can be approved) once `finish` ran. */
  async begin(input: NewPlan): Promise<PlanWriter> {
    const now = Number(await this.redis.time().then(([s, us]) => Number(s) * 1000 + Math.floor(Number(us) / 1000)));
    const id = `plan-${newRunId(new Date(now))}`;
    return new PlanWriter(this, id, input, now);
  }

  async workspaceOf(id: string): Promise<string | undefined> {
    return (await this.redis.hget(planWorkspacesKey(this.prefix), id)) ?? undefined;
  }

  async get(id: string): Promise<PlanRecord | null> {
    const workspace = await this.workspaceOf(id);
    if (workspace === undefined) return null;
    const [hash, [s, us]] = await Promise.all([
      this.redis.hgetall(planKey(this.prefix, workspace, id)),
      this.redis.time(),
    ]);
    if (!hash.status) return null;
    return decodePlan(hash, Number(s) * 1000 + Math.floor(Number(us) / 1000));
  }

  async require(id: string): Promise<PlanRecord> {
    const plan = await this.get(id);
    if (!plan)
      throw new CrmSyncError(
        'PLAN_NOT_FOUND',
        `no plan with id ${id} (plans are kept ${PLAN_KEEP_MS / 3_600_000} h after they expire); list them with: crm-sync plans list`,
      );
    return plan;
  }

  /** The newest plans of a workspace (or of every workspace that has plans), newest first. */
  async list(options: { workspace?: string; limit?: number } = {}): Promise<PlanRecord[]> {
    const limit = options.limit ?? DEFAULTS.cli.listLimit;
    const workspaces =
      options.workspace !== undefined
        ? [options.workspace]
        : [...new Set(Object.values(await this.redis.hgetall(planWorkspacesKey(this.prefix))))];
    const ids: Array<{ id: string; workspace: string; score: number }> = [];
    for (const w of workspaces) {
      const got = await this.redis.zrevrange(workspacePlansKey(this.prefix, w), 0, limit - 1, 'WITHSCORES');
      for (let i = 0; i < got.length; i += 2) ids.push({ id: got[i]!, workspace: w, score: Number(got[i + 1]) });
    }
    ids.sort((a, b) => b.score - a.score);
    const plans: PlanRecord[] = [];
    for (const { id, workspace } of ids.slice(0, limit)) {
      const plan = await this.get(id);
      if (plan) plans.push(plan);
      // Its keys expired: the index entries go too.
      else {
        await this.redis.zrem(workspacePlansKey(this.prefix, workspace), id);
        await this.redis.hdel(planWorkspacesKey(this.prefix), id);
      }
    }
    return plans;
  }

  /**
   * One page of the plans of some workspaces (null: every workspace that has plans), newest
   * first, and how many there are (for the dashboard's list). Read only: a plan whose keys
   * expired is left out of the page (`list` prunes the index), so a page may be a little short.
   */
  async listPage(options: {
    workspaces: readonly string[] | null;
    offset: number;
    limit: number;
  }): Promise<{ plans: PlanRecord[]; total: number }> {
    const { offset, limit } = options;
    const workspaces = options.workspaces ?? [
      ...new Set(Object.values(await this.redis.hgetall(planWorkspacesKey(this.prefix)))),
    ];
    const end = offset + limit;
    const parts = await Promise.all(
      workspaces.map(async (w) => {
        const key = workspacePlansKey(this.prefix, w);
        // One workspace: just its page; several: each one's first `end`, merged below.
        const from = workspaces.length === 1 ? offset : 0;
        const [count, got] = await Promise.all([
          this.redis.zcard(key),
          this.redis.zrevrange(key, from, end - 1, 'WITHSCORES'),
        ]);
        const ids: Array<{ id: string; score: number }> = [];
        for (let i = 0; i < got.length; i += 2) ids.push({ id: got[i]!, score: Number(got[i + 1]) });
        return { count, ids };
      }),
    );
    const merged = parts.flatMap((p) => p.ids).sort((a, b) => b.score - a.score || (a.id < b.id ? 1 : -1));
    const ids = workspaces.length === 1 ? merged : merged.slice(offset, end);
    const plans = (await Promise.all(ids.map(({ id }) => this.get(id)))).filter((p): p is PlanRecord => p !== null);
    return { plans, total: parts.reduce((sum, p) => sum + p.count, 0) };
  }

  /** The plan's rows in row order (a bucket of 100 at a time: a 100,000-row plan is never held whole). */
  async *rows(plan: Pick<PlanRecord, 'id' | 'workspace' | 'rows'>, fromBucket = 0): AsyncGenerator<PlanRow> {
    const last = Math.floor(maxRow(plan) / RESULT_BUCKET_ROWS);
    for (let b = fromBucket; b <= last; b++) {
      const hash = await this.redis.hgetall(planRowsKey(this.prefix, plan.workspace, plan.id, b));
      const rows = Object.entries(hash)
        .map(([row, value]) => decodePlanRow(Number(row), value))
        .sort((x, y) => x.row - y.row);
      yield* rows;
    }
  }

  /** One page of rows (for `plans show` and the dashboard): rows `offset` .. `offset + limit - 1` in row order. */
  async page(plan: PlanRecord, offset: number, limit: number, keep: (r: PlanRow) => boolean = () => true) {
    const out: PlanRow[] = [];
    let seen = 0;
    for await (const row of this.rows(plan)) {
      if (!keep(row)) continue;
      if (seen++ < offset) continue;
      out.push(row);
      if (out.length >= limit) break;
    }
    return out;
  }

  approve(id: string, by: string): Promise<PlanMove> {
    return this.#move(id, 'approve', by);
  }

  /** Discards the plan; `reason`, when given, is kept as the plan's status reason (`plans show`). */
  async discard(id: string, by: string, reason?: string): Promise<PlanMove> {
    const move = await this.#move(id, 'discard', by);
    if (move.ok && reason !== undefined) await this.setReason(id, reason);
    return move;
  }

  /** Why the plan is where it is (a held tick, a discard by a newer tick), shown with its status. */
  async setReason(id: string, reason: string): Promise<void> {
    const workspace = await this.#workspace(id);
    await this.redis.hset(planKey(this.prefix, workspace, id), 'reason', reason);
  }

  /**
   * Records `plan` as the newest planned tick of its sync and answers the plan the previous tick
   * left there, if any (it may be applied, discarded or gone by now: the caller looks).
   */
  async swapSyncPlan(
    plan: Pick<PlanRecord, 'id' | 'workspace' | 'syncName' | 'expiresAt'>,
  ): Promise<string | undefined> {
    if (plan.syncName === undefined) return undefined;
    const key = syncPlanKey(this.prefix, plan.workspace, plan.syncName);
    const previous = await this.redis.getset(key, plan.id);
    await this.redis.pexpireat(key, Date.parse(plan.expiresAt) + PLAN_KEEP_MS);
    return previous !== null && previous !== plan.id ? previous : undefined;
  }

  /** Takes the plan for applying, once: refused when approval is required and missing, expired, discarded or applied. */
  beginApply(id: string, requireApproval: boolean, token: string): Promise<PlanMove> {
    return this.#move(id, 'apply', token, requireApproval ? '1' : '0');
  }

  /** Records who applies the plan, and when (the plan is `applying`, taken by this process). */
  async setApplier(id: string, by: string): Promise<void> {
    const workspace = await this.#workspace(id);
    await this.redis.hset(planKey(this.prefix, workspace, id), 'appliedMs', String(Date.now()), 'appliedBy', by);
  }

  /** Records the run that applies the plan (the plan is `applying`, taken by this process). */
  async setRun(id: string, runId: string): Promise<void> {
    const workspace = await this.#workspace(id);
    await this.redis.hset(planKey(this.prefix, workspace, id), 'runId', runId);
  }

  /** Every write of the plan is queued in its run. */
  applied(id: string, token: string): Promise<PlanMove> {
    return this.#move(id, 'applied', token);
  }

  /** Applying stopped before a run existed: nothing was queued, the plan can be applied again. */
  unapply(id: string, token: string): Promise<PlanMove> {
    return this.#move(id, 'unapply', token);
  }

  async #workspace(id: string): Promise<string> {
    const workspace = await this.workspaceOf(id);
    if (workspace === undefined) throw new CrmSyncError('PLAN_NOT_FOUND', `no plan with id ${id}`);
    return workspace;
  }

  /** The undo of run `runId` as stored now (read only). */
  async undoClaim(workspace: string, runId: string): Promise<UndoClaim> {
    const [plan, taken] = await this.redis.hmget(undoClaimKey(this.prefix, workspace, runId), 'plan', 'taken');
    return { ...(plan ? { plan } : {}), ...(taken ? { taken } : {}) };
  }

  /**
   * Makes plan `id` the newest undo of run `runId`: older undo plans of the run are refused at
   * approve and apply from now on. Answers the undo plan taken for applying since `readMs` (the
   * new plan's read may be from before its writes: it is not made the newest), else undefined.
   */
  async claimUndo(
    workspace: string,
    runId: string,
    id: string,
    readMs: number,
    expireAtMs: number,
  ): Promise<string | undefined> {
    const reply = await CLAIM_UNDO.run(
      this.redis,
      { claimKey: undoClaimKey(this.prefix, workspace, runId) },
      { planId: id, readMs, expireAt: expireAtMs },
    );
    return reply.kind === 'undone' ? reply.taken : undefined;
  }

  async #move(id: string, action: string, by: string, required = '0'): Promise<PlanMove> {
    const workspace = await this.#workspace(id);
    const key = planKey(this.prefix, workspace, id);
    // An undo plan's moves read and write the undo of its run, in the same step.
    const undoOf = await this.redis.hget(key, 'undoOf');
    const claim = undoOf ? undoClaimKey(this.prefix, workspace, undoOf) : key;
    const reply = await MOVE_PLAN.run(this.redis, { planKey: key, claimKey: claim }, { action, by, required });
    if (reply.kind === 'missing') throw new CrmSyncError('PLAN_NOT_FOUND', `no plan with id ${id}`);
    if (reply.kind === 'ok') return { ok: true, status: reply.status };
    const { why, status, other } = reply;
    return { ok: false, why, status, ...(other !== undefined ? { other } : {}) };
  }

  /** Used by PlanWriter. */
  async _write(
    workspace: string,
    id: string,
    rows: ReadonlyArray<PlanRow>,
    expireAtMs: number,
    meta?: Record<string, string>,
  ): Promise<void> {
    const multi = this.redis.multi();
    const buckets = new Map<number, string[]>();
    for (const r of rows) {
      const b = Math.floor(r.row / RESULT_BUCKET_ROWS);
      const list = buckets.get(b) ?? [];
      list.push(String(r.row), encodePlanRow(r));
      buckets.set(b, list);
    }
    for (const [b, fields] of buckets) {
      const key = planRowsKey(this.prefix, workspace, id, b);
      multi.hset(key, ...fields);
      multi.pexpireat(key, expireAtMs);
    }
    if (meta) {
      const key = planKey(this.prefix, workspace, id);
      multi.hset(key, meta);
      multi.pexpireat(key, expireAtMs);
      multi.zadd(workspacePlansKey(this.prefix, workspace), meta.createdMs!, id);
    }
    await multi.exec();
    // Not in the workspace's slot: a single command of its own.
    if (meta) await this.redis.hset(planWorkspacesKey(this.prefix), id, workspace);
  }
}

/** Writes a plan's rows as the planner yields them; `finish` makes the plan exist. */
export class PlanWriter {
  #buffer: PlanRow[] = [];
  readonly createdMs: number;
  readonly expiresMs: number;

  constructor(
    private readonly store: PlanStore,
    readonly id: string,
    readonly input: NewPlan,
    now: number,
  ) {
    this.createdMs = now;
    this.expiresMs = now + input.ttlMs;
  }

  async add(row: PlanRow): Promise<void> {
    this.#buffer.push(row);
    if (this.#buffer.length >= WRITE_BATCH) await this.#flush();
  }

  async #flush(meta?: Record<string, string>): Promise<void> {
    const rows = this.#buffer;
    this.#buffer = [];
    if (rows.length === 0 && !meta) return;
    await this.store._write(this.input.workspace, this.id, rows, this.expiresMs + PLAN_KEEP_MS, meta);
  }

  /**
   * Makes the plan exist. An undo plan first becomes the newest undo of its run (claimUndo,
   * `createdMs` as its read's start: planUndo begins the plan before it reads the CRM); refused
   * (RUN_STATE, the plan never exists) when another undo of the run was taken for applying since.
   */
  async finish(summary: PlanSummary): Promise<PlanRecord> {
    const { input } = this;
    if (input.undoOf !== undefined) {
      const { workspace, undoOf } = input;
      const taken = await this.store.claimUndo(
        workspace,
        undoOf,
        this.id,
        this.createdMs,
        this.expiresMs + PLAN_KEEP_MS,
      );
      if (taken !== undefined)
        throw new CrmSyncError(
          'RUN_STATE',
          `run ${undoOf} was undone meanwhile, by plan ${taken} (crm-sync plans show ${taken}), while this undo read the CRM: its read may be from before those writes; undo the run again to see what is left. Nothing was planned.`,
        );
    }
    await this.#flush({
      id: this.id,
      status: 'pending',
      workspace: input.workspace,
      operation: input.operation,
      source: input.source,
      matchKey: input.matchKey,
      createdMs: String(this.createdMs),
      expiresMs: String(this.expiresMs),
      rows: String(summary.rows),
      counts: JSON.stringify(summary.counts),
      prediction: JSON.stringify(summary.prediction),
      fields: JSON.stringify(summary.fields),
      ...(summary.dialect !== undefined ? { dialect: JSON.stringify(summary.dialect) } : {}),
      ...(input.syncName !== undefined ? { syncName: input.syncName } : {}),
      ...(input.undoOf !== undefined ? { undoOf: input.undoOf } : {}),
    });
    return this.store.require(this.id);
  }
}

function maxRow(plan: Pick<PlanRecord, 'rows'>): number {
  // Rows are numbered from 1 in source order, one per source row.
  return plan.rows;
}

function decodePlan(h: Record<string, string>, now: number): PlanRecord {
  const status = h.status as PlanStatus;
  const expiresMs = Number(h.expiresMs);
  const plan: PlanRecord = {
    id: h.id!,
    workspace: h.workspace!,
    operation: h.operation as ReconcileOperation,
    source: h.source ?? '',
    matchKey: h.matchKey ?? '',
    status,
    expired: (status === 'pending' || status === 'approved') && now >= expiresMs,
    createdAt: new Date(Number(h.createdMs)).toISOString(),
    expiresAt: new Date(expiresMs).toISOString(),
    rows: countOf(h.rows),
    counts: JSON.parse(h.counts ?? '{}') as PlanCounts,
    prediction: JSON.parse(h.prediction ?? '{}') as PlanPrediction,
    fields: JSON.parse(h.fields ?? '[]') as string[],
  };
  if (h.approvedMs && h.approvedBy)
    plan.approval = { at: new Date(Number(h.approvedMs)).toISOString(), by: h.approvedBy };
  if (h.discardedMs && h.discardedBy)
    plan.discard = { at: new Date(Number(h.discardedMs)).toISOString(), by: h.discardedBy };
  if (h.appliedMs && h.appliedBy) plan.apply = { at: new Date(Number(h.appliedMs)).toISOString(), by: h.appliedBy };
  if (h.runId) plan.runId = h.runId;
  if (h.syncName) plan.syncName = h.syncName;
  if (h.undoOf) plan.undoOf = h.undoOf;
  if (h.reason) plan.reason = h.reason;
  if (h.dialect) plan.dialect = JSON.parse(h.dialect) as DialectFacts;
  return plan;
}
