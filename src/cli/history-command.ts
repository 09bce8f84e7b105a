import type { Command } from 'commander';

const actions = () => import('./history-action.js');

export function registerHistoryCommand(program: Command): void {
  program
    .command('history')
    .argument('<recordId>', "a CRM record's id")
    .description(
      'Every change crm-sync made to one record, newest first: time, run (and the run it undoes), row, field, ' +
        "before -> after; from the workspace's runs in Redis and its archived runs",
    )
    .requiredOption('-w, --workspace <name>', 'the workspace the record is in')
    .option('--json', 'JSON output (an array of entries)')
    .action(async (recordId: string, opts: { workspace: string; json?: boolean }, command: Command) =>
      (await actions()).showHistory(recordId, opts, command),
    );
}
