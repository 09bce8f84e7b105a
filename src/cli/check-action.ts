// What `crm-sync check` does, loaded by check-command.ts only when the command runs (its options
// and help are declared there).
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { DEFAULT_CONFIG_FILE, readSecret, weakTokenReason, MAKE_TOKEN_HINT, type Config } from '../config/index.js';
import { preflight, type CheckLine } from '../runtime/index.js';
import { cliContext } from './context.js';
import { TOKEN_ENV } from './dashboard-arguments.js';
import { EXIT } from './exit-codes.js';

/**
 * A config with nothing to run is a failed check, not "valid (0 workspaces)": the worker would
 * refuse to start on it. Says where the file was looked for (a missing --config or
 * CRM_SYNC_CONFIG file already stopped loading with CONFIG_NOT_FOUND).
 */
export function configProblem(config: Config, cwd = process.cwd()): CheckLine | null {
  if (config.source === null) {
    return {
      level: 'fail',
      subject: 'config',
      message:
        `no config file: looked for ${resolve(cwd, DEFAULT_CONFIG_FILE)} (neither --config nor CRM_SYNC_CONFIG is set); ` +
        `create it with a workspace under "workspaces", or name the file with --config`,
    };
  }
  if (Object.keys(config.workspaces).length === 0) {
    return {
      level: 'fail',
      subject: 'config',
      message: `${config.source} names no workspaces: add one under "workspaces" (baseUrl and apiKeyEnv or apiKeyFile)`,
    };
  }
  return null;
}

/**
 * A dashboard token that is set but trivially guessable fails here too, before anyone starts
 * the dashboard with it (the dashboard refuses it the same way). No token set: no line (not
 * every deployment runs the dashboard).
 */
export function dashboardTokenProblem(config: Config, env: NodeJS.ProcessEnv = process.env): CheckLine | null {
  const source = env[TOKEN_ENV]?.trim() ? { env: TOKEN_ENV } : config.dashboardTokenSource;
  let reason: string | null;
  try {
    reason = weakTokenReason(readSecret(source, 'dashboard token', env).reveal());
  } catch {
    return null;
  }
  if (reason === null) return null;
  const where = 'env' in source ? source.env : source.file;
  return {
    level: 'fail',
    subject: 'dashboard',
    message: `the dashboard token (${where}) ${reason} (${MAKE_TOKEN_HINT})`,
  };
}

export async function runCheck(opts: { workspace?: string[]; json?: boolean }, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  const problem = configProblem(config);
  const checked = await preflight({ config, logger, ...(opts.workspace ? { workspaces: opts.workspace } : {}) });
  const lines = problem === null ? checked : checked.map((l) => (l.subject === 'config' ? problem : l));
  const token = dashboardTokenProblem(config);
  if (token !== null) lines.splice(1, 0, token);
  const history = await historyLine(config);
  if (history !== null) lines.push(history);
  if (opts.json) process.stdout.write(`${JSON.stringify(lines, null, 2)}\n`);
  else process.stdout.write(`${lines.map((l) => `${l.level.padEnd(4)}  ${l.subject}: ${l.message}`).join('\n')}\n`);
  const failed = lines.filter((l) => l.level === 'fail');
  // A config with nothing to run is the first thing to fix, whatever Redis says.
  process.exitCode =
    problem !== null
      ? EXIT.USAGE
      : failed.some((l) => l.subject === 'redis')
        ? EXIT.INTERNAL
        : failed.length > 0
          ? EXIT.USAGE
          : EXIT.OK;
}

/** Whether the PostgreSQL history (config `history`) answers; null when none is configured. The URL is never shown. */
export async function historyLine(config: Config): Promise<CheckLine | null> {
  if (!config.history) return null;
  const { PgHistory } = await import('../history/index.js');
  const history = new PgHistory({ url: config.history.postgresUrl, table: config.history.table });
  try {
    const why = await history.ping();
    return why === null
      ? { level: 'ok', subject: 'history', message: `the history database answers (table ${config.history.table})` }
      : {
          level: 'fail',
          subject: 'history',
          message: `the history database does not answer (${why}); rows are still written, their history is held and retried`,
        };
  } finally {
    await history.close();
  }
}
