// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import { positiveInt } from './options.js';

const actions = () => import('./verify-action.js');

export function registerVerifyCommand(program: Command): void {
  program
    .command('verify')
    .argument('<runId>', 'a finished run')
    .description(
      'Page the CRM again and report every succeeded row of a run whose record no longer holds what was sent (drift), ' +
        'rows that share one record id, and deals just like a created one that no row recorded (suspected duplicates). ' +
        'What was sent is the digest kept with each row\'s result (a row corrected by "runs retry --file" is checked ' +
        "against the correction); the run's source file, when unchanged, only shows the sent values of drifted fields.",
    )
    .option('-o, --out <file>', 'write the drift (row,line,record_id,field,sent,current) as CSV; "-" for stdout')
    .option('--page-size <n>', 'records per list request', positiveInt, DEFAULTS.client.pageSize)
    .option('--json', 'print the counts as JSON')
    .action(async (runId: string, opts: { out?: string; pageSize: number; json?: boolean }, command: Command) =>
      (await actions()).verifyRunCommand(runId, opts, command),
    );
}
