// What `crm-sync runs undo` does, loaded by runs-command.ts only when the command runs.
import type { Command } from 'commander';
import { getWorkspace } from '../config/index.js';
import { applyPlan, PlanStore } from '../plans/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { formatPlanCounts } from '../reconcile/index.js';
import { cancelRun, followRun, settledRun, SETTLE_WAIT_MS } from '../lifecycle/index.js';
import { plural, stillWriting, type RunRecord } from '../runs/index.js';
import { createCrmClient, type Runtime } from '../runtime/index.js';
import { planUndo, type PlanUndoResult } from '../undo/index.js';
import { withRuntime, withWorkers } from './context.js';
import { QueuePresenceWatch } from './queue-presence.js';
import { exitCodeFor, formatRunSummary, warnIfNoWorkers } from './run-progress.js';
import { resultsOf } from './runs-actions.js';

export interface UndoOptions {
  plan?: boolean;
  /** A run still running or blocked is cancelled first, and its rows waited for, before the undo is planned. */
  cancelFirst?: boolean;
  wait?: boolean;
  work?: boolean;
  /** Always set by commander (DEFAULTS.cli.workConcurrency). */
  concurrency: number;
  json?: boolean;
}

/**
 * `runs undo <id>`: plans the undo (planUndo: the run's before/after against the CRM now), then
 * applies it as a new run (kind undo, linked both ways) unless `--plan` — or the workspace
 * requires approval, when the plan waits for `plans approve` like any.
 */
export async function undoRun(id: string, opts: UndoOptions, command: Command): Promise<void> {
  await withRuntime(command, async (scope) => {
    const { runtime, config, logger } = scope;
    const { source, archived } = await resultsOf(runtime.store, config.resultsDir, id);
    let run = await source.requireRun(id);
    if (opts.cancelFirst && !archived) run = await cancelFirst(runtime, run);
    const ws = getWorkspace(config, run.workspace);
    const plans = new PlanStore({ redis: runtime.redis, prefix: config.prefix });
    const client = createCrmClient(config, run.workspace, logger);
    let undo: PlanUndoResult;
    try {
      undo = await planUndo({
        plans,
        results: source,
        runs: runtime.store,
        run,
        client,
        budget: workspaceRequestBudget(runtime.redis, config, run.workspace, client),
        settings: { planTtlMs: ws.planTtlMs, driftMaxAgeMs: ws.driftMaxAgeMs, rateLimit: ws.rateLimit },
        logger,
      });
    } finally {
      client.close();
    }
    const report = {
      undoOf: run.id,
      planId: undo.plan.id,
      counts: undo.plan.counts,
      restores: undo.restores,
      left: undo.left,
      created: undo.created,
      listRequests: undo.pages,
      ...(archived ? { archived } : {}),
    };
    const held = !opts.plan && ws.requireApproval;
    if (opts.plan || held) {
      if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      else {
        process.stdout.write(
          `undo of run ${run.id} planned (nothing sent; ${undo.pages} list requests): plan ${undo.plan.id}: ${formatPlanCounts(undo.plan.counts)}\n`,
        );
        writeLeft(undo);
        if (held) process.stdout.write(`  workspace "${run.workspace}" requires approval (requireApproval)\n`);
        process.stdout.write(
          `  review: crm-sync plans show ${undo.plan.id}\n  then:   crm-sync plans approve ${undo.plan.id} && crm-sync apply ${undo.plan.id} --wait\n`,
        );
      }
      return;
    }
    await withWorkers(scope, { work: opts.work, workspace: run.workspace, concurrency: opts.concurrency }, async () => {
      const { run: started } = await applyPlan({
        plans,
        store: runtime.store,
        queue: runtime.queue(run.workspace),
        planId: undo.plan.id,
        requireApproval: false,
        rowsPerJob: ws.rowsPerJob,
        resultsDir: config.resultsDir,
        logger,
        onRun: (r) => logger.info({ runId: r.id, undoOf: run.id }, `run ${r.id} undoes run ${run.id}`),
      });
      const following = Boolean(opts.wait || opts.work);
      if (!following && started.counts.queued > 0) await warnIfNoWorkers(runtime.store, run.workspace);
      const final = following
        ? await followRun(runtime.store, started.id, {
            quiet: Boolean(opts.json),
            presence: new QueuePresenceWatch(runtime.store, run.workspace),
          })
        : started;
      if (opts.json) process.stdout.write(`${JSON.stringify({ ...report, run: final }, null, 2)}\n`);
      else {
        process.stdout.write(`${formatRunSummary(final)}\n  undoes run ${run.id}\n`);
        writeLeft(undo);
        if (!following) process.stdout.write(`  queued; follow it with: crm-sync runs show ${started.id}\n`);
      }
      process.exitCode = following ? exitCodeFor(final) : 0;
    });
  });
}

/** Longest `--cancel-first` waits for the cancelled run's rows to be recorded (requests on the wire finish). */
const CANCEL_SETTLE_MS = 4 * SETTLE_WAIT_MS;

/**
 * `--cancel-first`: a running or blocked run is cancelled (as `runs cancel`), then its rows are
 * waited for — the requests on the wire finish, the rows workers and the producer hold are
 * recorded cancelled — so the undo is planned over everything the run wrote. A run that is
 * still recording rows after CANCEL_SETTLE_MS is refused by planUndo, saying so.
 */
async function cancelFirst(runtime: Runtime, run: RunRecord): Promise<RunRecord> {
  if (run.status === 'running' || run.status === 'blocked') {
    const { removed } = await cancelRun({
      store: runtime.store,
      queueFor: (workspace) => runtime.queue(workspace),
      runId: run.id,
      reason: 'cancelled to undo it (crm-sync runs undo --cancel-first)',
    });
    process.stderr.write(
      `run ${run.id} cancelled to undo it (${removed} waiting rows removed); waiting for its rows on the wire to be recorded\n`,
    );
  }
  if (stillWriting(run) === undefined) return run;
  return settledRun(runtime.store, await runtime.store.requireRun(run.id), { timeoutMs: CANCEL_SETTLE_MS });
}

/** The fields left as they are and the created deals, one line each (the first 50 of each). */
function writeLeft(undo: PlanUndoResult): void {
  const out = (s: string) => process.stdout.write(`${s}\n`);
  if (undo.left.length > 0) out(`  ${plural(undo.left.length, 'field')} left as they are:`);
  for (const l of undo.left.slice(0, 50))
    out(
      `    ${l.recordId} ${l.field}: ${l.reason}${l.now !== undefined ? `: now ${JSON.stringify(l.now)}` : ''} (the run wrote ${JSON.stringify(l.wrote)}; run row ${l.runRows.join(', ')})`,
    );
  if (undo.created.length > 0)
    out(`  ${undo.created.length} deals the run created (the API has no delete: remove them by hand):`);
  for (const c of undo.created.slice(0, 50)) out(`    deal ${c.dealId} (row ${c.row}): ${JSON.stringify(c.fields)}`);
}
