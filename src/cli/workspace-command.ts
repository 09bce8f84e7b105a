import type { Command } from 'commander';

const actions = () => import('./workspace-actions.js');

export function registerWorkspaceCommand(program: Command): void {
  const ws = program
    .command('workspace')
    .description(
      "Pause, resume or show a workspace's queue. An operator's pause and a block by a refused API key are " +
        'kept apart: "workspace resume" lifts only the pause, "runs resume <id>" only the block. ' +
        'A workspace whose CRM does not answer (connection refused, DNS, a wrong baseUrl) is held by the ' +
        'circuit breaker: it goes on by itself once a probe gets an answer, or after "workspace resume".',
    );

  ws.command('pause')
    .description("Stop every worker from taking this workspace's rows (nothing is lost: rows wait in the queue)")
    .requiredOption('-w, --workspace <name>', 'workspace from the config')
    .option('--reason <text>', 'why, shown by "workspace status" and the dashboard', 'paused by an operator')
    .action(async (opts: { workspace: string; reason: string }, command: Command) =>
      (await actions()).pauseWorkspaceCommand(opts, command),
    );

  ws.command('resume')
    .description(
      'Lift an operator\'s pause and an open circuit breaker (a block by a refused API key stays until "runs resume")',
    )
    .requiredOption('-w, --workspace <name>', 'workspace from the config')
    .action(async (opts: { workspace: string }, command: Command) =>
      (await actions()).resumeWorkspaceCommand(opts, command),
    );

  ws.command('status')
    .description('Paused or blocked (and why), queue depth, runs, and whether any worker serves the queue')
    .option('-w, --workspace <name>', 'only this workspace (default: every configured one)')
    .option('--json', 'JSON output')
    .action(async (opts: { workspace?: string; json?: boolean }, command: Command) =>
      (await actions()).workspaceStatusCommand(opts, command),
    );
}
