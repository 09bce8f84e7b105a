import { createWriteStream, mkdirSync, renameSync, rmSync } from 'node:fs';
import { finished } from 'node:stream/promises';
import { join } from 'node:path';
import got from 'got';
import { DEFAULTS, getWorkspace, resolveSettings } from '../config/index.js';
import { AuthError, type CrmClient } from '../crm/index.js';
import { errorMessage } from '../errors/index.js';
import { readMappingFile } from '../ingest/index.js';
import { reconcileImport, type PlanCounts, type PlanSummary } from '../reconcile/index.js';
import { applyPlan, makePlan, PlanStore, refusal, type PlanRecord } from '../plans/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { referenceStoreOf } from '../references/index.js';
import { type RunStop } from '../lifecycle/index.js';
import type { Logger } from '../log/index.js';
import {
  runReads,
  writeResultsCsv,
  type RunCounts,
  type RunOptions,
  type RunRecord,
  type RunStatus,
} from '../runs/index.js';
import { createCrmClient, type Runtime } from '../runtime/index.js';
import { abortRun } from './abort-run.js';
import { openSyncSource, resolvePath, sourceText, type SyncDefinition } from './sync-definition.js';
import { blockedSkipReason, findPreviousRun, previousRunState } from './previous-run.js';
import { SyncLock } from './sync-lock.js';
import { guardsTicks, holdReason, judgeGuard, planCommands, type SyncHold } from './sync-guard.js';

export interface RunSyncOptions {
  runtime: Runtime;
  /** Default: a client for the definition's workspace, closed at the end. */
  client?: CrmClient;
  /** How often the run is checked while it goes. Default DEFAULTS.scheduler (500 ms). */
  pollMs?: number;
  /** Lifetime of the per-sync lock, renewed while the sync runs. Default DEFAULTS.scheduler (60 000 ms). */
  lockTtlMs?: number;
  /** Timeout of the notify POST. Default DEFAULTS.scheduler (10 000 ms). */
  notifyTimeoutMs?: number;
  /**
   * Return as soon as the run is blocked (the CRM refused the key). Default false: the
   * scheduler keeps the lock and watches a blocked run until it ends, so maxFailures still
   * applies once it is resumed. The CLI sets it: a person is waiting and has to fix the key.
   */
  returnWhenBlocked?: boolean;
  /**
   * Apply the tick even when its plan goes over the sync's guard, or the sync asks approval
   * of every tick (`schedule run --override-guard`: a person looked and said yes). Default false.
   */
  overrideGuard?: boolean;
  /**
   * Who approves the plan an overridden tick applies, recorded on the plan (`schedule run
   * --override-guard` passes its CLI user). Default `schedule run --override-guard`.
   */
  approver?: string;
}

/** What a sync reports when it ends (to the log, and as JSON to the notify URL). */
export interface SyncSummary {
  sync: string;
  workspace: string;
  operation: string;
  runId: string;
  status: RunStatus;
  /** True when the tick was skipped because the previous run was still going. */
  skipped: boolean;
  reason?: string;
  source: string;
  counts: RunCounts;
  /** What reconcile decided per row (absent for a skipped tick). */
  plan?: PlanCounts;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  /** CSV of the failed and invalid rows, when there are any. */
  failedRowsFile?: string;
  dryRun: boolean;
  /**
   * Set when the tick was planned but not applied: its plan went over the sync's guard (or the
   * sync or its workspace holds every tick). Why, the counts, the top fields, and the stored plan
   * awaiting approval with the commands that apply or discard it; nothing was sent.
   */
  held?: SyncHold;
  /** The tick's stored plan (a guarded sync's tick): held, or applied by the run. */
  planId?: string;
  /** An earlier plan of this sync that still waited for approval, discarded by this tick. */
  supersededPlan?: string;
}

const LOCK_BUSY = 'a tick of this sync is still being handled';

/**
 * One tick of a sync: never alongside another run of the same sync that is still going or
 * blocked (skipped and recorded as a completed run whose reason says so), otherwise a
 * reconciled run that is followed to its end — aborted once `maxFailures` rows failed or when
 * the sync lock is lost — then summarised to the log and the notify URL.
 */
export async function runSync(def: SyncDefinition, given: RunSyncOptions): Promise<SyncSummary> {
  const options = resolveSettings(given, {
    pollMs: DEFAULTS.scheduler.pollMs,
    lockTtlMs: DEFAULTS.scheduler.lockTtlMs,
    notifyTimeoutMs: DEFAULTS.scheduler.notifyTimeoutMs,
  });
  const { runtime } = options;
  const { store, logger, config } = runtime;
  const log = logger.child({ sync: def.name });
  const started = new Date();
  const skip = async (why: string) =>
    finish(def, options, await recordUnsent(def, runtime, `skipped: ${why}`), started, true);
  const lock = new SyncLock(runtime.redis, config.prefix, def.name, options.lockTtlMs);
  if (!(await lock.acquire())) {
    const going = await findPreviousRun(store, def.name);
    return skip(going && previousRunState(going) === 'blocked' ? blockedSkipReason(going) : LOCK_BUSY);
  }
  const stopWatching = new AbortController();
  let watching: Promise<void> = Promise.resolve();
  let client: CrmClient | undefined;
  try {
    // Read under the lock: read before it, a run that finished producing in between would be
    // taken for an orphan below.
    let previous = await findPreviousRun(store, def.name);
    if (previous && previousRunState(previous) === 'orphan') {
      // Its producer is gone — or it lost the lock and stops at its next renewal. Make sure the
      // lock is still ours and the run still orphaned before failing it.
      if (!(await lock.held())) return await skip(LOCK_BUSY);
      previous = await store.requireRun(previous.id);
      if (previousRunState(previous) === 'orphan') {
        await store.setStatus(previous.id, 'failed', 'its producer stopped before reading the whole file');
        log.warn({ runId: previous.id }, 'previous run of this sync had lost its producer: marked failed');
      }
    }
    if (previous) {
      const state = previousRunState(previous);
      if (state === 'blocked') return await skip(blockedSkipReason(previous));
      if (state === 'running') return await skip(`previous run ${previous.id} still running`);
    }

    const mapping = def.mapping !== undefined ? readMappingFile(resolvePath(def, def.mapping)) : undefined;
    client = options.client ?? createCrmClient(config, def.workspace, logger);
    const ws = getWorkspace(config, def.workspace);
    const max = def.options.maxFailures;
    const queue = runtime.queue(def.workspace);
    let abortReason: string | undefined;
    let watchError: unknown;
    const failuresReason = (failed: number) =>
      max !== undefined && failed >= max ? `aborted: ${failed} rows failed (maxFailures ${max})` : undefined;
    /** Why a run still going must stop now, if it must (the first reason sticks). */
    const stopReason = (failed: number): string | undefined => {
      if (abortReason !== undefined) return abortReason;
      if (lock.lost)
        return `aborted: ${lock.lostReason ?? 'the sync lock was lost'}; another tick may be running this sync`;
      if (watchError !== undefined) return `aborted: the run could not be watched (${errorMessage(watchError)})`;
      return failuresReason(failed);
    };
    // The producer's stop: rows it still reads or holds are recorded RUN_ABORTED, never queued.
    const stopProducer = new AbortController();
    /** Fails the run and removes its waiting jobs (RUN_ABORTED); safe to repeat. */
    const abort = async (runId: string, reason: string) => {
      if (abortReason === undefined) log.warn({ runId, reason }, 'sync run aborted');
      abortReason = reason;
      if (!stopProducer.signal.aborted) stopProducer.abort({ kind: 'aborted', reason } satisfies RunStop);
      const removed = await abortRun(store, queue, runId, reason);
      if (removed > 0) log.info({ runId, removed }, 'waiting rows of the aborted run removed');
    };
    const stillGoing = (run: RunRecord) =>
      run.status === 'running' ||
      (run.status === 'blocked' && !options.returnWhenBlocked && previousRunState(run) === 'blocked');
    const watch = async (runId: string, signal: AbortSignal) => {
      for await (const run of runReads(store, runId, { everyMs: options.pollMs, going: stillGoing, signal })) {
        // A run that ended is judged once more after the producer is done (below).
        if (!stillGoing(run)) return;
        const why = stopReason(run.counts.failed);
        if (why !== undefined) return abort(runId, why);
      }
    };
    const onRun = (run: RunRecord) => {
      log.info({ runId: run.id, source: run.source }, 'sync run started');
      // Handled at once: a rejection here must not wait (unhandled) for the producer to end.
      watching = watch(run.id, stopWatching.signal).catch((err: unknown) => {
        watchError = err;
        stopProducer.abort({
          kind: 'aborted',
          reason: `aborted: the run could not be watched (${errorMessage(err)})`,
        } satisfies RunStop);
        log.error({ runId: run.id, err: errorMessage(err) }, 'could not watch the sync run');
      });
    };
    /** The run's end, judged once more after its producer is done, then summarised. */
    const settle = async (produced: RunRecord, counts: PlanCounts, extra: TickPlanFacts = {}) => {
      await watching;
      let run = await store.requireRun(produced.id);
      // Again after the producer is done: it may have queued its last chunk after a first sweep.
      // A run that completed is only failed for its failures, never for a lock lost afterwards.
      const going = run.status === 'running' || run.status === 'blocked';
      const why =
        going || abortReason !== undefined ? stopReason(run.counts.failed) : failuresReason(run.counts.failed);
      // A run an operator cancelled stays cancelled: the sync reports it as it is.
      if (why !== undefined && run.status !== 'cancelled') {
        await abort(run.id, why);
        run = await store.requireRun(run.id);
      }
      if (watchError !== undefined) throw watchError;
      return finish(def, options, run, started, false, counts, undefined, extra);
    };

    if (guardsTicks(def, ws.requireApproval)) {
      const plans = new PlanStore({ redis: runtime.redis, prefix: config.prefix });
      const tick = await planTick(def, runtime, plans, client, mapping);
      // undefined: the CRM refused the key while the tick planned; the reconciled run below reports it (blocked).
      if (tick !== undefined) {
        const { plan } = tick;
        const by = `sync:${def.name}`;
        const dropPlan = async (why: string) => {
          tick.removeFile();
          await plans.discard(plan.id, by, `discarded: ${why}`).catch(() => undefined);
        };
        // Another tick may have taken the sync over while this one planned.
        if (lock.lost) {
          const why = `${lock.lostReason ?? 'the sync lock was lost'} while the tick was planned`;
          await dropPlan(`the tick that made it was skipped: ${why}`);
          return await skip(why);
        }
        const hold = judgeGuard(def, tick.summary, ws.requireApproval);
        const held = hold !== undefined && !options.overrideGuard;
        const superseded = await supersede(plans, plan, held, by, log);
        const facts: TickPlanFacts = {
          planId: plan.id,
          ...(superseded !== undefined ? { supersededPlan: superseded } : {}),
        };
        if (held) {
          const full: SyncHold = {
            ...hold,
            ...tick.keepFile(),
            planId: plan.id,
            commands: planCommands(plan.id),
            ...(superseded !== undefined ? { supersededPlan: superseded } : {}),
          };
          const reason = holdReason(full);
          await plans.setReason(plan.id, reason);
          const run = await recordUnsent(def, runtime, reason, { planId: plan.id, rows: tick.summary.rows });
          log.warn(
            { runId: run.id, planId: plan.id, held: hold.reasons },
            'sync tick held as a plan awaiting approval; nothing sent',
          );
          return await finish(def, options, run, started, false, plan.counts, full, facts);
        }
        tick.removeFile();
        // A run of this sync may have started while this tick planned (an operator applying an earlier plan of it).
        const going = await findPreviousRun(store, def.name);
        if (going) {
          const why = `run ${going.id} of this sync started while the tick was planned`;
          await dropPlan(`the tick that made it was skipped: ${why}`);
          return await skip(why);
        }
        // Over the guard and overridden, or in a workspace that requires approval: `schedule run
        // --override-guard` is the approval (recorded on the plan).
        if (hold !== undefined || ws.requireApproval) {
          const approved = await plans.approve(plan.id, options.approver ?? OVERRIDE_APPROVER);
          if (!approved.ok) throw refusal(plan, approved);
        }
        const { run } = await applyPlan({
          plans,
          store,
          queue,
          planId: plan.id,
          requireApproval: ws.requireApproval,
          rowsPerJob: ws.rowsPerJob,
          logger: log,
          signal: stopProducer.signal,
          ...(max !== undefined ? { abortAfterUnmatched: max } : {}),
          onRun,
        });
        return await settle(run, plan.counts, facts);
      }
    }

    const result = await reconcileImport({
      file: openSyncSource(def),
      op: def.operation,
      workspace: def.workspace,
      client,
      budget: workspaceRequestBudget(runtime.redis, config, def.workspace, client),
      references: { store: referenceStoreOf(config, def.workspace, runtime.redis), maxAgeMs: ws.referencesMaxAgeMs },
      queue,
      store,
      syncName: def.name,
      logger: log,
      dryRun: def.options.dryRun,
      rowsPerJob: ws.rowsPerJob,
      ...(def.matchKey !== undefined ? { matchKey: def.matchKey } : {}),
      ...(def.keyColumn !== undefined ? { keyColumn: def.keyColumn } : {}),
      ...(mapping ? { mapping } : {}),
      signal: stopProducer.signal,
      ...(max !== undefined ? { abortAfterUnmatched: max } : {}),
      onRun,
    });
    return await settle(result.run, result.counts);
  } finally {
    stopWatching.abort();
    await watching;
    if (client && !options.client) client.close();
    await lock
      .release()
      .catch((err: unknown) =>
        log.warn({ err: errorMessage(err) }, 'could not release the sync lock (it expires on its own)'),
      );
  }
}

/** Who approved a tick's plan that `--override-guard` applied, when the caller does not say. */
const OVERRIDE_APPROVER = 'schedule run --override-guard';

/** What a summary says of a planned tick's plans. */
type TickPlanFacts = Pick<SyncSummary, 'planId' | 'supersededPlan'>;

interface TickPlan {
  plan: PlanRecord;
  summary: PlanSummary;
  /** The plan CSV stays (a held tick): its path, when it could be written. */
  keepFile(): { planFile?: string };
  /** The plan CSV goes (the tick is applied, or dropped). */
  removeFile(): void;
}

/**
 * A guarded tick plans first, with the planner `crm-sync plan` uses (one read of the source, the
 * CRM's list pages in the workspace's budget, no write) into a stored plan with the sync's name;
 * the plan's CSV (reconcile's, one line per row) goes to resultsDir for a held tick. Applied or
 * held, the tick goes on from this plan: the source is not read again, nothing is diffed twice.
 * Undefined when the CRM refused the key while planning (the tick goes on to report it as blocked).
 */
async function planTick(
  def: SyncDefinition,
  runtime: Runtime,
  plans: PlanStore,
  client: CrmClient,
  mapping: ReturnType<typeof readMappingFile> | undefined,
): Promise<TickPlan | undefined> {
  const { config, logger } = runtime;
  const ws = getWorkspace(config, def.workspace);
  let planFile: string | undefined = join(config.resultsDir, `${def.name}-${Date.now()}-plan.csv.part`);
  let out: ReturnType<typeof createWriteStream> | undefined;
  try {
    mkdirSync(config.resultsDir, { recursive: true });
    out = createWriteStream(planFile);
  } catch (err) {
    logger.warn({ sync: def.name, err: errorMessage(err) }, 'could not write the plan file of a guarded tick');
    planFile = undefined;
  }
  const removeFile = () => {
    if (planFile !== undefined) rmSync(planFile, { force: true });
    planFile = undefined;
  };
  let made;
  try {
    made = await makePlan({
      store: plans,
      file: openSyncSource(def),
      op: def.operation,
      workspace: def.workspace,
      client,
      budget: workspaceRequestBudget(runtime.redis, config, def.workspace, client),
      references: { store: referenceStoreOf(config, def.workspace, runtime.redis), maxAgeMs: ws.referencesMaxAgeMs },
      logger: logger.child({ sync: def.name }),
      syncName: def.name,
      settings: { planTtlMs: ws.planTtlMs, driftMaxAgeMs: ws.driftMaxAgeMs, rateLimit: ws.rateLimit },
      ...(def.matchKey !== undefined ? { matchKey: def.matchKey } : {}),
      ...(def.keyColumn !== undefined ? { keyColumn: def.keyColumn } : {}),
      ...(mapping ? { mapping } : {}),
      ...(out ? { out } : {}),
    });
  } catch (err) {
    if (out) out.destroy();
    removeFile();
    // A refused key is the run's to report (blocked, as every reconciled run is): let the tick go on to it.
    if (!(err instanceof AuthError)) throw err;
    return undefined;
  } finally {
    if (out && !out.destroyed) {
      out.end();
      await finished(out).catch(() => undefined);
    }
  }
  return {
    plan: made.plan,
    summary: made.summary,
    removeFile,
    keepFile: () => {
      if (planFile === undefined) return {};
      // Named by its plan, as runs are named by their ids: the file a hold points to is found by the plan's id.
      const kept = join(config.resultsDir, `${def.name}-${made.plan.id}.csv`);
      renameSync(planFile, kept);
      planFile = undefined;
      return { planFile: kept };
    },
  };
}

/**
 * Two waiting plans of one sync would be confusing (which one is today's?), so a tick's plan
 * replaces the one the previous tick left waiting: that one is discarded, its status reason
 * naming the plan that replaced it. A plan already approved but not applied goes too (its data
 * is older than this tick's); one applying or applied is left as it is. Answers the discarded id.
 */
async function supersede(
  plans: PlanStore,
  plan: PlanRecord,
  held: boolean,
  by: string,
  log: Logger,
): Promise<string | undefined> {
  const previous = await plans.swapSyncPlan(plan);
  if (previous === undefined) return undefined;
  const earlier = await plans.get(previous);
  if (!earlier || earlier.expired || (earlier.status !== 'pending' && earlier.status !== 'approved')) return undefined;
  const why =
    `discarded: a newer tick of sync ${plan.syncName ?? '?'} made plan ${plan.id}, which ` +
    (held ? 'replaces it and waits for approval in its place' : 'was applied in its place');
  const moved = await plans.discard(previous, by, why);
  if (!moved.ok) return undefined;
  log.info({ planId: previous, by: plan.id }, 'earlier waiting plan of this sync discarded');
  return previous;
}

/**
 * A tick's run that sends nothing: nothing read into it, completed at once, its reason saying why
 * (a hold naming the plan that waits, or `skipped: …`).
 */
async function recordUnsent(
  def: SyncDefinition,
  runtime: Runtime,
  reason: string,
  held?: RunOptions['held'],
): Promise<RunRecord> {
  const run = await runtime.store.createRun({
    workspace: def.workspace,
    operation: def.operation,
    source: sourceText(def),
    syncName: def.name,
    status: 'completed',
    options: { reconcile: true, ...(def.matchKey ? { matchKey: def.matchKey } : {}), ...(held ? { held } : {}) },
  });
  await runtime.store.setStatus(run.id, 'completed', reason);
  return runtime.store.finishProducing(run.id);
}

async function finish(
  def: SyncDefinition,
  options: RunSyncOptions,
  run: RunRecord,
  started: Date,
  skipped: boolean,
  plan?: PlanCounts,
  held?: SyncHold,
  facts: TickPlanFacts = {},
): Promise<SyncSummary> {
  const { store, config, logger } = options.runtime;
  const finishedAt = new Date();
  const summary: SyncSummary = {
    sync: def.name,
    workspace: def.workspace,
    operation: def.operation,
    runId: run.id,
    status: run.status,
    skipped,
    ...(run.reason ? { reason: run.reason } : {}),
    source: run.source,
    counts: run.counts,
    ...(plan ? { plan } : {}),
    startedAt: started.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationMs: finishedAt.getTime() - started.getTime(),
    dryRun: def.options.dryRun,
    ...(held ? { held } : {}),
    ...facts,
  };
  if (run.counts.failed + run.counts.invalid > 0) {
    try {
      mkdirSync(config.resultsDir, { recursive: true });
      const path = join(config.resultsDir, `${def.name}-${run.id}-failed.csv`);
      const out = createWriteStream(path);
      await writeResultsCsv(store, run.id, out, { problemsOnly: true });
      out.end();
      await finished(out);
      summary.failedRowsFile = path;
    } catch (err) {
      logger.warn({ sync: def.name, runId: run.id, err: errorMessage(err) }, 'could not write the failed-rows file');
    }
  }
  logger.info(
    { summary },
    `sync ${def.name} ${skipped ? 'skipped' : held ? 'held' : 'finished'}: run ${run.id} ${run.status}`,
  );
  if (def.options.notifyUrl) {
    try {
      await got.post(def.options.notifyUrl, {
        json: summary,
        timeout: { request: options.notifyTimeoutMs },
        retry: { limit: 2, methods: ['POST'] },
      });
    } catch (err) {
      // A webhook that is down must not fail the sync; the summary is in the log either way.
      logger.warn({ sync: def.name, err: errorMessage(err) }, 'notify webhook failed');
    }
  }
  return summary;
}
