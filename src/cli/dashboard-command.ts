import { InvalidArgumentError, type Command } from 'commander';
import { readSecret, type Secret } from '../config/index.js';
import { buildDashboard } from '../dashboard/index.js';
import { CrmSyncError } from '../errors/index.js';
import { openRuntime } from '../runtime/index.js';
import { cliContext } from './context.js';
import { list } from './options.js';
import { onShutdown, SHUTDOWN_GRACE_MS } from './shutdown.js';

interface DashboardCommandOptions {
  port: number;
  host: string;
  insecureNoAuth?: boolean;
  workspace?: string[];
}

const TOKEN_ENV = 'CRM_SYNC_DASHBOARD_TOKEN';

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port number from 0 to 65535');
  return n;
}

export function registerDashboardCommand(program: Command): void {
  program
    .command('dashboard')
    .description('Serve the retry dashboard: runs, failed rows, retry and download, workspace pause/resume, Bull Board, /metrics')
    .option('--port <n>', 'TCP port (0 = any free port)', port, 3000)
    .option('--host <address>', 'interface to listen on (0.0.0.0 in a container)', '127.0.0.1')
    .option('-w, --workspace <names>', 'workspaces to show, comma-separated (default: all configured)', list)
    .option('--insecure-no-auth', 'run without a token: anyone who can reach the port can retry and pause (local use only)')
    .addHelpText(
      'after',
      `\nThe token comes from ${TOKEN_ENV}, or the config's "dashboard": {"tokenEnv"|"tokenFile"}.\n` +
        'Browsers sign in at /login; scripts send "Authorization: Bearer <token>". /healthz and /readyz are open.',
    )
    .action(async (opts: DashboardCommandOptions, command: Command) => {
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
      } else {
        logger.warn('DASHBOARD RUNNING WITHOUT AUTHENTICATION (--insecure-no-auth): anyone who can reach this port can retry runs and pause workspaces');
      }
      const runtime = await openRuntime(config, logger);
      const app = await buildDashboard({ runtime, token, logger, ...(opts.workspace ? { workspaces: opts.workspace } : {}) });
      const address = await app.listen({ port: opts.port, host: opts.host });
      process.stdout.write(`crm-sync dashboard on ${address}${token === null ? '  (NO AUTHENTICATION)' : ''}\n`);
      await new Promise<void>((resolve) => {
        onShutdown(
          async () => {
            await app.close();
            await runtime.close();
            logger.info('dashboard stopped');
            resolve();
          },
          { forceAfterMs: 10_000 + SHUTDOWN_GRACE_MS },
        );
      });
    });
}
