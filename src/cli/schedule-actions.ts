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
} from '../schedule/index.js';
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
      const c = summary.counts;
      process.stdout.write(
        opts.json
          ? `${JSON.stringify(summary, null, 2)}\n`
          : `sync ${name}: run ${summary.runId} ${summary.status}${summary.reason ? ` (${summary.reason})` : ''}: ` +
              `${c.succeeded} sent, ${c.skipped} unchanged/skipped, ${c.failed} failed, ${c.invalid} invalid, in ${summary.durationMs} ms` +
              `${summary.failedRowsFile ? `\n  failed rows: ${summary.failedRowsFile}` : ''}\n`,
      );
      process.exitCode = exitCodeFor(await runtime.store.requireRun(summary.runId));
    });
  });
}
