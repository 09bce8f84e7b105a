import type { Command } from 'commander';
import { helpFooter } from './options.js';
import type { RefsOptions } from './refs-action.js';

const actions = () => import('./refs-action.js');

export function registerRefsCommand(program: Command): void {
  program
    .command('refs')
    .description(
      'What names a mapping may use ("by": "name"): the pipelines with their stages, the tags and the companies ' +
        "the workspace's records show (the API lists no pipelines, tags or companies, so these come from the deal, " +
        'contact and lead lists), and when each list was read. Sends no write.',
    )
    .requiredOption('-w, --workspace <name>', 'workspace from the config')
    .option('--refresh', 'read the deal, contact and lead lists again now (in the workspace rate budget)')
    .option('--json', 'JSON output')
    .addHelpText(
      'after',
      helpFooter(
        '\nNames resolve from passes younger than the workspace setting "referencesMaxAgeMs" (default 1 h); runs read an older one again. See docs/names.md.',
      ),
    )
    .action(async (opts: RefsOptions, command: Command) => (await actions()).runRefs(opts, command));
}
