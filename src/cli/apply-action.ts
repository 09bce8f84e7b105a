// What `crm-sync apply` does, loaded by apply-command.ts only when the command runs.
import type { Command } from 'commander';
import { getWorkspace } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import { applyPlan, PlanStore } from '../plans/index.js';
import { withRuntime, withWorkers } from './context.js';
import { cliApprover } from './plans-actions.js';
import { QueuePresenceWatch } from './queue-presence.js';
import { exitCodeFor, formatRunSummary, warnIfNoWorkers } from './run-progress.js';
import { followRun } from '../lifecycle/index.js';

export interface ApplyOptions {
  workspace?: string;
  wait?: boolean;
  work?: boolean;
  /** Always set by commander (DEFAULTS.cli.workConcurrency). */
  concurrency: number;
  json?: boolean;
}

export async function runApply(planId: string, opts: ApplyOptions, command: Command): Promise<void> {
  await withRuntime(command, async (scope) => {
    const { runtime, config, logger } = scope;
    const plans = new PlanStore({ redis: runtime.redis, prefix: config.prefix });
    const plan = await plans.require(planId);
    if (opts.workspace !== undefined && opts.workspace !== plan.workspace)
      throw new CrmSyncError(
        'USAGE',
        `plan ${planId} belongs to workspace "${plan.workspace}", not "${opts.workspace}"; nothing was sent`,
      );
    const ws = getWorkspace(config, plan.workspace);
    // Said where it happens: approval is optional unless the workspace requires it.
    if (plan.status === 'pending' && !plan.expired && !ws.requireApproval)
      process.stderr.write(
        `plan ${planId} is not approved: workspace "${plan.workspace}" does not require approval ("requireApproval": false), so it is applied as it is\n`,
      );
    await withWorkers(
      scope,
      { work: opts.work, workspace: plan.workspace, concurrency: opts.concurrency },
      async () => {
        const { run } = await applyPlan({
          plans,
          store: runtime.store,
          queue: runtime.queue(plan.workspace),
          planId,
          requireApproval: ws.requireApproval,
          rowsPerJob: ws.rowsPerJob,
          resultsDir: config.resultsDir,
          by: cliApprover(),
          logger,
          onRun: (r) => logger.info({ runId: r.id, planId }, `run ${r.id} applies plan ${planId}`),
        });
        const following = Boolean(opts.wait || opts.work);
        if (!following && run.counts.queued > 0) await warnIfNoWorkers(runtime.store, plan.workspace);
        const final = following
          ? await followRun(runtime.store, run.id, {
              quiet: Boolean(opts.json),
              presence: new QueuePresenceWatch(runtime.store, plan.workspace),
            })
          : run;
        if (opts.json) process.stdout.write(`${JSON.stringify(final, null, 2)}\n`);
        else {
          process.stdout.write(`${formatRunSummary(final)}\n`);
          if (!following) process.stdout.write(`  queued; follow it with: crm-sync runs show ${run.id}\n`);
        }
        process.exitCode = following ? exitCodeFor(final) : 0;
      },
    );
  });
}
