// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';

const actions = () => import('./demo-action.js');

export function registerDemoCommand(program: Command): void {
  program
    .command('demo')
    .description(
      'Run the whole product on embedded defaults: an in-process CRM simulator, a local Redis ' +
        '(REDIS_URL, else 127.0.0.1:6379, else a private redis-server), workers, and the files in samples/. ' +
        'Some rows fail on purpose; their CSVs are written to ./crm-sync-results.',
    )
    .option('--results-dir <dir>', 'where failed-row CSVs go', DEFAULTS.config.resultsDir)
    .action(async (opts: { resultsDir: string }, command: Command) => (await actions()).runDemoCommand(opts, command));
}
