import type { Command } from 'commander';

/** Every CLI command's registration, in the order `--help` lists them. */
export const COMMANDS: ReadonlyArray<(program: Command) => void> = [];
