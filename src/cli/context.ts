import type { Command } from 'commander';
import { loadConfig, type Config } from '../config/index.js';
import { createLogger, type Logger } from '../log/index.js';
import type { Runtime } from '../runtime/index.js';
// The module itself, not the runtime barrel, which loads the queues (BullMQ) that `runs list` never needs.
import { openStore, type OpenStore } from '../runtime/light.js';

/** Options every command accepts (declared once on the root program). */
export interface GlobalOptions {
  config?: string;
  logLevel?: string;
}

export interface CliContext {
  config: Config;
  logger: Logger;
}

/** The config a command's global options name (read again by a worker for new workspaces). */
export function cliConfig(command: Command): Config {
  const globals = command.optsWithGlobals<GlobalOptions>();
  return loadConfig(globals.config !== undefined ? { path: globals.config } : {});
}

/**
 * Long-running services: their stderr is a log (JSON off a terminal). Every other command is
 * run by a person, who reads pretty lines wherever stderr goes (src/log: wantsPretty).
 */
const SERVICE_COMMANDS = new Set(['worker', 'scheduler', 'dashboard']);

/** Loads config and builds the logger for a command, from the root program's global options. */
export function cliContext(command: Command): CliContext {
  const globals = command.optsWithGlobals<GlobalOptions>();
  const config = cliConfig(command);
  const logger = createLogger({
    level: globals.logLevel ?? config.logLevel,
    audience: SERVICE_COMMANDS.has(command.name()) ? 'service' : 'person',
  });
  return { config, logger };
}

export interface RuntimeScope extends CliContext {
  runtime: Runtime;
}

/**
 * Runs `fn` with a connected runtime for the command, closed afterwards whatever happens. The
 * runtime (queues, so BullMQ) is loaded here, when a command runs: not for its help.
 */
export async function withRuntime<T>(command: Command, fn: (scope: RuntimeScope) => Promise<T>): Promise<T> {
  const { config, logger } = cliContext(command);
  const { openRuntime } = await import('../runtime/index.js');
  const runtime = await openRuntime(config, logger);
  try {
    return await fn({ config, logger, runtime });
  } finally {
    await runtime.close();
  }
}

export interface StoreScope extends CliContext, OpenStore {}

/** Like withRuntime for commands that only read or write runs: the run store without queues. */
export async function withStore<T>(command: Command, fn: (scope: StoreScope) => Promise<T>): Promise<T> {
  const { config, logger } = cliContext(command);
  const opened = await openStore(config);
  try {
    return await fn({ config, logger, ...opened });
  } finally {
    opened.redis.disconnect();
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
