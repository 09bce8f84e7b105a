import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { EXIT } from './exit-codes.js';
import { helpFooter } from './options.js';

const EXIT_HELP = `
Exit codes:
  ${EXIT.OK}  done; every row succeeded or was skipped
  ${EXIT.ROWS_FAILED}  the run finished with failed, invalid, uncertain, drifted or cancelled rows (export them with "runs export <id> --failed")
  ${EXIT.USAGE}  bad arguments, configuration or input: nothing was sent
  ${EXIT.BLOCKED}  the CRM refused the API key: the run is blocked ("runs resume <id>" after fixing it), or a worker refused to start
  ${EXIT.INTERNAL}  Redis unreachable or an unexpected error
  ${EXIT.REDIS_LOST}  Redis stopped answering (or stayed full while the file was read) for over --redis-outage (the run goes on: crm-sync runs show <id>; stopped mid-file: crm-sync runs resume <id>)
  ${EXIT.REDIS_DATA_LOST}  Redis lost the run's data (restarted without persistence, or evicting keys): rows may have been sent; the message says how to send the rest without duplicates
  ${EXIT.HELD}  held for approval, nothing sent: a guarded sync's tick waits as a plan (the output names it and the commands that review, approve and apply it)
  ${EXIT.CRM_BAD_ANSWER}  the CRM answered in a way its spec does not allow (a body off the schema, another page than asked): the command stopped; the message names the request

Configuration: ./crm-sync.config.json, or CRM_SYNC_CONFIG, or --config <path>.
Environment: REDIS_URL (default redis://127.0.0.1:6379), REDIS_CLUSTER_NODES (a Redis Cluster's seed nodes host:port,host:port; wins over REDIS_URL), CRM_SYNC_PREFIX, CRM_SYNC_LOG_LEVEL, LOG_FORMAT (json or pretty).`;

/** package.json's version: src/cli/ and dist/cli/ both sit two levels below the package root. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: string };
  return pkg.version ?? 'unknown';
}

/** Builds the commander program; each command lives in its own file and only parses arguments. */
export function buildProgram(registrations: ReadonlyArray<(program: Command) => void>): Command {
  const program = new Command('crm-sync')
    .description('Bulk sync and import worker for the CRM external API')
    .version(packageVersion(), '-V, --version', 'print the version')
    .option('-c, --config <path>', 'config file (default ./crm-sync.config.json or $CRM_SYNC_CONFIG)')
    .addOption(
      new Option('--log-level <level>', 'log level').choices(['trace', 'debug', 'info', 'warn', 'error', 'silent']),
    )
    .addHelpText('after', helpFooter(EXIT_HELP))
    .showHelpAfterError('(add --help for usage)')
    .helpCommand('help [command]', 'Show the help of a command')
    .exitOverride();
  for (const register of registrations) register(program);
  // Commands are described in sentences (capital first), options in phrases: the help of every
  // command and subcommand says "help" the same way.
  const sameHelp = (command: Command): void => {
    command.helpOption('-h, --help', 'show this help');
    if (command.commands.length > 0) command.helpCommand('help [command]', 'Show the help of a command');
    for (const sub of command.commands) sameHelp(sub);
  };
  sameHelp(program);
  return program;
}
