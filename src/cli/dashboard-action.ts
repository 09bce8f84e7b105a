// What `crm-sync dashboard` does, loaded by dashboard-command.ts only when the command runs (its
// options and help are declared there).
import { isIP } from 'node:net';
import type { Command } from 'commander';
import { DEFAULTS, derivedSettings, readSecret, type Secret } from '../config/index.js';
import { buildDashboard, checkTokenStrength } from '../dashboard/index.js';
import { CrmSyncError } from '../errors/index.js';
import { openRuntime } from '../runtime/index.js';
import { cliContext } from './context.js';
import { listenError } from './listen-errors.js';
import { TOKEN_ENV, type DashboardCommandOptions } from './dashboard-arguments.js';
import { serveUntilSignal } from './shutdown.js';

/** 127.0.0.0/8, ::1 and localhost: the only interfaces an unauthenticated dashboard may use. */
export function isLoopbackAddress(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || (isIP(h) === 4 && h.startsWith('127.'));
}

export async function runDashboard(opts: DashboardCommandOptions, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  let token: Secret | null = null;
  if (!opts.insecureNoAuth) {
    // The well-known variable wins over the config so a container can always set it.
    const source = process.env[TOKEN_ENV]?.trim() ? { env: TOKEN_ENV } : config.dashboardTokenSource;
    try {
      token = readSecret(source, 'dashboard token');
    } catch (err) {
      throw new CrmSyncError(
        'SECRET_MISSING',
        `the dashboard needs a token: set ${TOKEN_ENV} (or "dashboard" in the config), or pass --insecure-no-auth for local use only`,
        { cause: err },
      );
    }
    checkTokenStrength(
      token,
      `the dashboard token (${'env' in source ? source.env : "the config's dashboard.tokenFile"})`,
    );
  } else {
    if (!isLoopbackAddress(opts.host)) {
      throw new CrmSyncError(
        'USAGE',
        `--insecure-no-auth listens on loopback only (127.0.0.1, ::1 or localhost), not ${opts.host}: set a token to serve other machines`,
      );
    }
    if (opts.trustProxy !== undefined)
      throw new CrmSyncError(
        'USAGE',
        '--insecure-no-auth cannot be used with --trust-proxy: an open dashboard is for this machine only',
      );
    logger.warn(
      'DASHBOARD RUNNING WITHOUT AUTHENTICATION (--insecure-no-auth): anyone on this machine can retry runs and pause workspaces',
    );
  }
  for (const name of opts.workspace ?? []) {
    if (config.workspaces[name] === undefined)
      throw new CrmSyncError('WORKSPACE_UNKNOWN', `workspace "${name}" is not in the configuration`);
  }
  const { started } = await serveUntilSignal({
    start: async (signal) => {
      const runtime = await openRuntime(config, logger);
      const app = await buildDashboard({
        runtime,
        token,
        logger,
        ...(opts.workspace ? { workspaces: opts.workspace } : {}),
        ...(opts.trustProxy !== undefined ? { trustProxy: opts.trustProxy } : {}),
      }).catch(async (err: unknown) => {
        await runtime.close();
        throw err;
      });
      if (signal.aborted) {
        // Stopped while it was being built: the port is never opened.
        await app.close();
        await runtime.close();
        throw signal.reason;
      }
      const address = await app.listen({ port: opts.port, host: opts.host }).catch(async (err: unknown) => {
        await app.close();
        await runtime.close();
        throw listenError(err, { what: 'the dashboard', host: opts.host, port: opts.port });
      });
      process.stdout.write(`crm-sync dashboard on ${address}${token === null ? '  (NO AUTHENTICATION)' : ''}\n`);
      return { app, runtime };
    },
    stop: async ({ app, runtime }) => {
      try {
        await app.close();
      } finally {
        await runtime.close();
      }
    },
    forceAfterMs: derivedSettings({ closeTimeoutsMs: [DEFAULTS.dashboard.closeTimeoutMs] }).forceExitAfterMs,
  });
  logger.info(started ? 'dashboard stopped' : 'dashboard stopped before it started');
}
