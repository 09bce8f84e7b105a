import type { Command } from 'commander';
import { helpFooter, list } from './options.js';

const actions = () => import('./check-action.js');

export function registerCheckCommand(program: Command): void {
  program
    .command('check')
    .description(
      'Preflight before running unattended: the config is valid; Redis answers (warns on a maxmemory-policy ' +
        "other than noeviction and on no persistence); each workspace's key is accepted by a one-record list " +
        'call and its baseUrl answers like the CRM; workers serve its queue. Sends no write.',
    )
    .option('-w, --workspace <names>', 'workspaces to check, comma-separated (default: all configured)', list)
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      helpFooter(
        '\nExit code 0 when nothing failed (warnings included), 2 when the config, a key or a baseUrl is wrong, 4 when Redis cannot be reached.',
      ),
    )
    .action(async (opts: { workspace?: string[]; json?: boolean }, command: Command) =>
      (await actions()).runCheck(opts, command),
    );
}
