import type { Command } from 'commander';

type Register = (program: Command) => void;

export interface CommandEntry {
  name: string;
  /** Loads the command's module only when needed: a worker process need not load the dashboard. */
  load: () => Promise<Register>;
}

/**
 * Every CLI command, in the order `--help` lists them. A `<name>-command.ts` only declares (options,
 * help text) and imports commander and light modules; its action loads `<name>-action(s).ts`,
 * where BullMQ, the CRM client, fastify and the rest are, when the command runs. So help is fast,
 * and root `--help`, which loads every declaration, too.
 */
export const COMMANDS: readonly CommandEntry[] = [
  { name: 'import', load: async () => (await import('./import-command.js')).registerImportCommand },
  { name: 'worker', load: async () => (await import('./worker-command.js')).registerWorkerCommand },
  { name: 'runs', load: async () => (await import('./runs-command.js')).registerRunsCommand },
  { name: 'check', load: async () => (await import('./check-command.js')).registerCheckCommand },
  { name: 'workspace', load: async () => (await import('./workspace-command.js')).registerWorkspaceCommand },
  { name: 'reconcile', load: async () => (await import('./reconcile-command.js')).registerReconcileCommand },
  { name: 'plan', load: async () => (await import('./plan-command.js')).registerPlanCommand },
  { name: 'plans', load: async () => (await import('./plans-command.js')).registerPlansCommand },
  { name: 'apply', load: async () => (await import('./apply-command.js')).registerApplyCommand },
  { name: 'refs', load: async () => (await import('./refs-command.js')).registerRefsCommand },
  { name: 'history', load: async () => (await import('./history-command.js')).registerHistoryCommand },
  { name: 'verify', load: async () => (await import('./verify-command.js')).registerVerifyCommand },
  { name: 'schedule', load: async () => (await import('./schedule-command.js')).registerScheduleCommand },
  { name: 'scheduler', load: async () => (await import('./scheduler-command.js')).registerSchedulerCommand },
  { name: 'dashboard', load: async () => (await import('./dashboard-command.js')).registerDashboardCommand },
  { name: 'demo', load: async () => (await import('./demo-command.js')).registerDemoCommand },
  { name: 'sim', load: async () => (await import('./sim-command.js')).registerSimCommand },
];

/** Global options that take a value, so the command name can be found without parsing. */
const VALUE_OPTIONS = new Set(['-c', '--config', '--log-level']);

/**
 * The registrations to load for these arguments: just the named command's, or every one when
 * no known command is named (root `--help`, a typo that commander should explain).
 */
export async function registrationsFor(args: readonly string[]): Promise<Register[]> {
  let name: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (VALUE_OPTIONS.has(arg)) i++;
    else if (!arg.startsWith('-')) {
      name = arg;
      break;
    }
  }
  const only = COMMANDS.find((c) => c.name === name);
  return Promise.all((only ? [only] : COMMANDS).map((c) => c.load()));
}
