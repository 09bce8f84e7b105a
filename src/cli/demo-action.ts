// What `crm-sync demo` does, loaded by demo-command.ts only when the command runs (its options and
// help are declared there).
import type { Command } from 'commander';
import { runDemo } from '../demo/index.js';
import { createLogger } from '../log/index.js';
import type { GlobalOptions } from './context.js';

export async function runDemoCommand(opts: { resultsDir: string }, command: Command): Promise<void> {
  const globals = command.optsWithGlobals<GlobalOptions>();
  // The demo's summary is for a person: its warnings read as lines beside it, never as JSON.
  const logger = createLogger({ level: globals.logLevel ?? 'warn', audience: 'person' });
  await runDemo({ logger, resultsDir: opts.resultsDir });
}
