import type { Command } from 'commander';
import { loadConfig, type Config } from '../config/index.js';
import { createLogger, type Logger } from '../log/index.js';

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
