import type { Command } from 'commander';
import { registerDashboardCommand } from './dashboard-command.js';
import { registerDemoCommand } from './demo-command.js';
import { registerImportCommand } from './import-command.js';
import { registerReconcileCommand } from './reconcile-command.js';
import { registerScheduleCommand } from './schedule-command.js';
import { registerSchedulerCommand } from './scheduler-command.js';
import { registerVerifyCommand } from './verify-command.js';
import { registerRunsCommand } from './runs-command.js';
import { registerSimCommand } from './sim-command.js';
import { registerWorkerCommand } from './worker-command.js';

/** Every CLI command's registration, in the order `--help` lists them. */
export const COMMANDS: ReadonlyArray<(program: Command) => void> = [
  registerImportCommand,
  registerWorkerCommand,
  registerRunsCommand,
  registerReconcileCommand,
  registerVerifyCommand,
  registerScheduleCommand,
  registerSchedulerCommand,
  registerDashboardCommand,
  registerDemoCommand,
  registerSimCommand,
];
