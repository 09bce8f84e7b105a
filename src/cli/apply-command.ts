// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import type { ApplyOptions } from './apply-action.js';
import { helpFooter, positiveInt } from './options.js';

export function registerApplyCommand(program: Command): void {
  program
    .command('apply')
    .argument('<planId>', 'a plan made by "crm-sync plan"')
    .description(
      "Send exactly a stored plan's writes (no second diff), once: a run whose rows are the plan's updates and creates. " +
        'Before each update the worker checks the record still holds the values the plan saw; a record changed since ' +
        'ends "drifted" and is not sent.',
    )
    .option('-w, --workspace <name>', "the plan's workspace (checked; default: the plan's)")
    .option('--wait', 'follow the run to the end (progress on stderr) and exit with its outcome')
    .option('--work', 'also process the queue in this process, no separate worker needed (implies --wait)')
    .option('--concurrency <n>', 'requests in flight with --work', positiveInt, DEFAULTS.cli.workConcurrency)
    .option('--json', 'print the run as JSON on stdout at the end')
    .addHelpText(
      'after',
      helpFooter(
        `
Refused with exit code 2, nothing sent, when the plan is not approved and its workspace has "requireApproval": true ("crm-sync plans approve <planId>"), when it expired (planTtlMs), was discarded, or was already applied; the message says which.

Examples:
  crm-sync plans approve plan-20261126-051200-123-000abcde
  crm-sync apply plan-20261126-051200-123-000abcde --wait --json`,
      ),
    )
    .action(async (planId: string, opts: ApplyOptions, command: Command) =>
      (await import('./apply-action.js')).runApply(planId, opts, command),
    );
}
