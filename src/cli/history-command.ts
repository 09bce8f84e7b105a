import type { Command } from 'commander';

const actions = () => import('./history-action.js');

export function registerHistoryCommand(program: Command): void {
  program
    .command('history')
    .argument('<recordId>', "a CRM record's id")
    .description(
      'Every change crm-sync made to one record, newest first: time, run (and the run it undoes), row, field, ' +
        "before -> after; from the workspace's runs in Redis and its archived runs, or, with a history database, from it " +
        '(and from Redis for runs whose changes have not all reached it yet). When the database does not answer, the runs ' +
        'in Redis are read instead and a note on stderr says so (exit 0); a note also names changes the database can never hold',
    )
    .requiredOption('-w, --workspace <name>', 'the workspace the record is in')
    .option('--json', 'JSON output (an array of entries)')
    .action(async (recordId: string, opts: { workspace: string; json?: boolean }, command: Command) =>
      (await actions()).showHistory(recordId, opts, command),
    );
}
