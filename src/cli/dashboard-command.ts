// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import { port, TOKEN_ENV, trustProxy, type DashboardCommandOptions } from './dashboard-arguments.js';
import { helpFooter, list } from './options.js';

const actions = () => import('./dashboard-action.js');

export function registerDashboardCommand(program: Command): void {
  program
    .command('dashboard')
    .description(
      'Serve the retry dashboard: runs, failed rows, retry and download, workspace pause/resume, Bull Board, /metrics',
    )
    .option('--port <n>', 'TCP port (0 = any free port)', port, DEFAULTS.dashboard.port)
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
      helpFooter(
        `\nThe token comes from ${TOKEN_ENV}, or the config's "dashboard": {"tokenEnv"|"tokenFile"}; it must have at least ` +
          '32 characters (make one with: openssl rand -hex 16). Browsers sign in at /login; scripts send ' +
          '"Authorization: Bearer <token>". /healthz and /readyz are open.',
      ),
    )
    .action(async (opts: DashboardCommandOptions, command: Command) => (await actions()).runDashboard(opts, command));
}
