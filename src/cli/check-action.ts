// What `crm-sync check` does, loaded by check-command.ts only when the command runs (its options
// and help are declared there).
import type { Command } from 'commander';
import { preflight } from '../runtime/index.js';
import { cliContext } from './context.js';
import { EXIT } from './exit-codes.js';

export async function runCheck(opts: { workspace?: string[]; json?: boolean }, command: Command): Promise<void> {
  const { config, logger } = cliContext(command);
  const lines = await preflight({ config, logger, ...(opts.workspace ? { workspaces: opts.workspace } : {}) });
  if (opts.json) process.stdout.write(`${JSON.stringify(lines, null, 2)}\n`);
  else process.stdout.write(`${lines.map((l) => `${l.level.padEnd(4)}  ${l.subject}: ${l.message}`).join('\n')}\n`);
  const failed = lines.filter((l) => l.level === 'fail');
  process.exitCode = failed.some((l) => l.subject === 'redis')
    ? EXIT.INTERNAL
    : failed.length > 0
      ? EXIT.USAGE
      : EXIT.OK;
}
