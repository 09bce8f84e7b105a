import type { Command } from 'commander';
import { loadConfig, type Config } from '../config/index.js';
import { createLogger, type Logger } from '../log/index.js';
import { openRuntime, type Runtime } from '../runtime/index.js';

/** Options every command accepts (declared once on the root program). */
export interface GlobalOptions {
  config?: string;
  logLevel?: string;
}

export interface CliContext {
  config: Config;
  logger: Logger;
}

/** Loads config and builds the logger for a command, from the root program's global options. */
export function cliContext(command: Command): CliContext {
  const globals = command.optsWithGlobals<GlobalOptions>();
  const config = loadConfig(globals.config !== undefined ? { path: globals.config } : {});
  const logger = createLogger({ level: globals.logLevel ?? config.logLevel });
  return { config, logger };
}

export interface RuntimeScope extends CliContext {
  runtime: Runtime;
}

/** Runs `fn` with a connected runtime for the command, closed afterwards whatever happens. */
export async function withRuntime<T>(command: Command, fn: (scope: RuntimeScope) => Promise<T>): Promise<T> {
  const { config, logger } = cliContext(command);
  const runtime = await openRuntime(config, logger);
  try {
    return await fn({ config, logger, runtime });
  } finally {
    await runtime.close();
  }
}

/**
 * `--work`: also process the workspace's queue in this process while `fn` runs, so no separate
 * worker is needed. Loaded on demand: most commands never start workers.
 */
export async function withWorkers<T>(
  scope: RuntimeScope,
  options: { work?: boolean | undefined; workspace: string; concurrency?: number | undefined },
  fn: () => Promise<T>,
): Promise<T> {
  if (!options.work) return fn();
  const { startWorkerPool } = await import('../worker/index.js');
  const pool = await startWorkerPool({
    config: scope.config,
    logger: scope.logger,
    workspaces: [options.workspace],
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
  });
  try {
    return await fn();
  } finally {
    await pool.close();
  }
}
