import { isIP } from 'node:net';
import { InvalidArgumentError, type Command } from 'commander';
import { readSecret, type Secret } from '../config/index.js';
import { buildDashboard, checkTokenStrength, type DashboardOptions } from '../dashboard/index.js';
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
  trustProxy?: DashboardOptions['trustProxy'];
}

const TOKEN_ENV = 'CRM_SYNC_DASHBOARD_TOKEN';

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError('must be a port number from 0 to 65535');
  return n;
}

/**
 * `true`, or proxy addresses/CIDRs, comma-separated (fastify's trustProxy). No hop counts: this
 * fastify ignores them (a hop count cannot tell the proxy from a client that sends the header).
 */
function trustProxy(value: string): NonNullable<DashboardOptions['trustProxy']> {
  const v = value.trim();
  if (v === 'true') return true;
  if (v === 'false') return false;
  const parts = v
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  for (const p of parts) {
    if (isIP(p.split('/')[0] ?? '') === 0 && !['loopback', 'linklocal', 'uniquelocal'].includes(p)) {
      throw new InvalidArgumentError(
        'must be true, or the addresses/CIDRs of the proxies, e.g. 10.0.0.0/8,127.0.0.1 (or loopback)',
      );
    }
  }
  return parts;
}

/** 127.0.0.0/8, ::1 and localhost: the only interfaces an unauthenticated dashboard may use. */
export function isLoopbackAddress(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || (isIP(h) === 4 && h.startsWith('127.'));
}

export function registerDashboardCommand(program: Command): void {
  program
    .command('dashboard')
    .description(
      'Serve the retry dashboard: runs, failed rows, retry and download, workspace pause/resume, Bull Board, /metrics',
    )
    .option('--port <n>', 'TCP port (0 = any free port)', port, 3000)
    .option('--host <address>', 'interface to listen on (0.0.0.0 in a container)', '127.0.0.1')
    .option(
      '-w, --workspace <names>',
      'serve only these workspaces, comma-separated: other runs are not shown (default: all)',
      list,
    )
    .option(
      '--trust-proxy <proxies>',
      'believe X-Forwarded-For/-Proto/-Host from these proxies: addresses/CIDRs (or true) of the TLS proxy in front',
      trustProxy,
    )
    .option(
      '--insecure-no-auth',
      'run without a token, on a loopback address only: anyone on this machine can retry and pause (local use only)',
    )
    .addHelpText(
      'after',
      `\nThe token comes from ${TOKEN_ENV}, or the config's "dashboard": {"tokenEnv"|"tokenFile"}; it must have at least\n` +
        '32 characters (make one with: openssl rand -hex 16). Browsers sign in at /login; scripts send\n' +
        '"Authorization: Bearer <token>". /healthz and /readyz are open.',
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
