// What `crm-sync schedule list|sync|remove|run` does, loaded by schedule-command.ts only when the
// command runs (its options and help are declared there).
import type { Command } from 'commander';
import type { Runtime } from '../runtime/index.js';
import {
  findDefinition,
  listSchedules,
  loadDefinitions,
  openSyncQueue,
  removeSchedule,
  runSync,
  syncSchedules,
  type SyncQueue,
  type SyncSummary,
} from '../schedule/index.js';
import { formatDuration, plural } from '../runs/index.js';
import { withRuntime, withWorkers } from './context.js';
import { EXIT } from './exit-codes.js';
import { exitCodeFor } from './run-progress.js';
import { cliApprover } from './plans-actions.js';

export interface JobsOption {
  jobsDir: string;
}

async function withQueue<T>(command: Command, fn: (queue: SyncQueue, runtime: Runtime) => Promise<T>): Promise<T> {
  return withRuntime(command, async ({ runtime, config }) => {
    const queue = openSyncQueue(runtime.redis, config.prefix);
    try {
      return await fn(queue, runtime);
    } finally {
      await queue.close();
    }
  });
}

export async function listSyncSchedules(opts: JobsOption, command: Command): Promise<void> {
  await withQueue(command, async (queue) => {
    const defs = loadDefinitions(opts.jobsDir);
    const installed = new Map((await listSchedules(queue)).map((s) => [s.name, s]));
    for (const d of defs) {
      const s = installed.get(d.name);
      installed.delete(d.name);
      const state = s ? `installed, next ${s.next ?? '?'}` : 'not installed (run "crm-sync schedule sync")';
      process.stdout.write(
        `${d.name}  ${d.operation} -> ${d.workspace}  "${d.schedule.cron}" ${d.schedule.timezone}  ${state}\n`,
      );
    }
    for (const s of installed.values())
      process.stdout.write(`${s.name}  installed, but no definition in ${opts.jobsDir} (removed by "schedule sync")\n`);
    if (defs.length === 0 && installed.size === 0) process.stdout.write(`no sync definitions in ${opts.jobsDir}\n`);
  });
}

export async function syncInstalledSchedules(opts: JobsOption, command: Command): Promise<void> {
  await withQueue(command, async (queue) => {
    // Load (and so validate) everything first: one bad file changes nothing.
    const defs = loadDefinitions(opts.jobsDir);
    const { installed, removed } = await syncSchedules(queue, defs);
    process.stdout.write(`installed: ${installed.join(', ') || '-'}\nremoved: ${removed.join(', ') || '-'}\n`);
  });
}

export async function removeSyncSchedule(name: string, _opts: unknown, command: Command): Promise<void> {
  await withQueue(command, async (queue) => {
    const removed = await removeSchedule(queue, name);
    process.stdout.write(removed ? `removed ${name}\n` : `no schedule named ${name}\n`);
    process.exitCode = removed ? EXIT.OK : EXIT.USAGE;
  });
}

/** A tick's outcome as a person reads it: a held tick in a few short lines with its plan's commands. */
function syncWords(summary: SyncSummary): string {
  const c = summary.counts;
  const took = formatDuration(summary.durationMs);
  const held = summary.held;
  if (held !== undefined) {
    const lines = [
      `sync ${summary.sync}: HELD for approval, nothing sent (run ${summary.runId}, ${took})`,
      ...held.reasons.map((r) => `  why: ${r}`),
      `  ${plural(held.rows, 'row')} planned: ${held.changedRows.toLocaleString('en-US')} would change`,
    ];
    if (held.planFile !== undefined) lines.push(`  plan as CSV: ${held.planFile}`);
    if (held.commands !== undefined) {
      lines.push(`  review:  ${held.commands.review}`);
      lines.push(`  approve: ${held.commands.approve}`);
      lines.push(`  apply:   ${held.commands.apply}`);
      lines.push(`  discard: ${held.commands.discard}`);
    }
    return `${lines.join('\n')}\n`;
  }
  return (
    `sync ${summary.sync}: run ${summary.runId} ${summary.status}${summary.reason ? ` (${summary.reason})` : ''}: ` +
    `${c.succeeded} sent, ${c.skipped} unchanged/skipped, ${c.failed} failed, ${c.invalid} invalid, took ${took}` +
    `${summary.failedRowsFile ? `\n  failed rows: ${summary.failedRowsFile}` : ''}\n`
  );
}

export async function runSyncNow(
  name: string,
  opts: JobsOption & { work?: boolean; concurrency: number; json?: boolean; overrideGuard?: boolean },
  command: Command,
): Promise<void> {
  const def = findDefinition(opts.jobsDir, name);
  await withRuntime(command, async (scope) => {
    const { runtime } = scope;
    await withWorkers(scope, { work: opts.work, workspace: def.workspace, concurrency: opts.concurrency }, async () => {
      // A blocked run ends this command (exit 3) instead of waiting for someone to fix the key.
      const summary = await runSync(def, {
        runtime,
        returnWhenBlocked: true,
        ...(opts.overrideGuard ? { overrideGuard: true, approver: `${cliApprover()} (--override-guard)` } : {}),
      });
      process.stdout.write(opts.json ? `${JSON.stringify(summary, null, 2)}\n` : syncWords(summary));
      process.exitCode = exitCodeFor(await runtime.store.requireRun(summary.runId));
    });
  });
}
