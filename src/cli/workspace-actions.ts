// What `crm-sync workspace pause|resume|status` does, loaded by workspace-command.ts only when the
// command runs (its options and help are declared there).
import type { Command } from 'commander';
import { getWorkspace } from '../config/index.js';
import { pauseWorkspace, unpauseWorkspace, workspaceStatus, type WorkspaceStatus } from '../queue/index.js';
import { withRuntime } from './context.js';

function statusLines(s: WorkspaceStatus): string {
  const state = s.blocked
    ? 'BLOCKED (API key refused)'
    : s.paused
      ? 'PAUSED by an operator'
      : s.unreachable
        ? 'HELD (the CRM does not answer: circuit breaker)'
        : s.queuePaused
          ? 'PAUSED (no reason recorded)'
          : 'active';
  const lines = [`workspace ${s.workspace}: ${state}`];
  if (s.paused)
    lines.push(
      `  paused since ${s.paused.since}: ${s.paused.reason} (lift with: crm-sync workspace resume -w ${s.workspace})`,
    );
  if (s.blocked) lines.push(`  blocked since ${s.blocked.since}: ${s.blocked.reason}`);
  if (s.unreachable) lines.push(`  held since ${s.unreachable.since}: ${s.unreachable.reason}`);
  lines.push(
    `  queue: ${s.waiting} jobs waiting, ${s.active} in progress; runs: ${s.runningRuns} running, ${s.blockedRuns} blocked`,
  );
  if (s.workers === 0)
    lines.push(
      `  workers: none serve this workspace's queue: start one with "crm-sync worker -w ${s.workspace}" (or use --work)`,
    );
  else if (s.workers > 0) lines.push(`  workers: ${s.workers} connected`);
  else lines.push('  workers: unknown (Redis refused CLIENT LIST)');
  return lines.join('\n');
}

export async function pauseWorkspaceCommand(
  opts: { workspace: string; reason: string },
  command: Command,
): Promise<void> {
  await withRuntime(command, async ({ runtime, config }) => {
    getWorkspace(config, opts.workspace);
    await pauseWorkspace({
      queue: runtime.queue(opts.workspace),
      store: runtime.store,
      workspace: opts.workspace,
      reason: opts.reason,
    });
    process.stdout.write(`workspace ${opts.workspace} paused: ${opts.reason}\n`);
  });
}

export async function resumeWorkspaceCommand(opts: { workspace: string }, command: Command): Promise<void> {
  await withRuntime(command, async ({ runtime, config }) => {
    getWorkspace(config, opts.workspace);
    const { running, blocked } = await unpauseWorkspace({
      queue: runtime.queue(opts.workspace),
      store: runtime.store,
      workspace: opts.workspace,
    });
    if (running) process.stdout.write(`workspace ${opts.workspace} resumed: workers take its rows again\n`);
    else
      process.stdout.write(
        `workspace ${opts.workspace}: the operator's pause is lifted, but it stays blocked: ${blocked?.reason ?? 'the API key was refused'}\n`,
      );
  });
}

export async function workspaceStatusCommand(
  opts: { workspace?: string; json?: boolean },
  command: Command,
): Promise<void> {
  await withRuntime(command, async ({ runtime, config }) => {
    if (opts.workspace) getWorkspace(config, opts.workspace);
    const names = opts.workspace ? [opts.workspace] : Object.keys(config.workspaces);
    const states = await Promise.all(
      names.map((name) => workspaceStatus({ queue: runtime.queue(name), store: runtime.store, workspace: name })),
    );
    if (opts.json) process.stdout.write(`${JSON.stringify(states, null, 2)}\n`);
    else process.stdout.write(`${states.map(statusLines).join('\n')}\n`);
  });
}
