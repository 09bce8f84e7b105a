// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import type { Command } from 'commander';
import { helpFooter } from './options.js';
import {
  DEFAULT_WORKSPACE,
  dnsDomain,
  probability,
  rate,
  wholeNumber,
  workspaceSpec,
  type SimCommandOptions,
  type WorkspaceSpec,
} from './sim-arguments.js';

const actions = () => import('./sim-action.js');

export function registerSimCommand(program: Command): void {
  program
    .command('sim')
    .description(
      'Run the CRM simulator: a local stand-in for the CRM API (spec-faithful, seeded data, rate limit and fault knobs)',
    )
    .option('--port <n>', 'TCP port to listen on (0 = any free port)', wholeNumber(0), DEFAULTS.sim.port)
    .option('--host <address>', 'interface to listen on', '127.0.0.1')
    .option(
      '--domain <name>',
      'also serve each workspace as <workspace>.<name> (e.g. acme.sim), for clients on another host or container, to whom *.localhost is their own loopback',
      dnsDomain,
    )
    .option(
      '--workspace <name:key>',
      `a workspace (its subdomain) and an API key for it, or name:env:VARIABLE to read the key from the environment; repeat for more workspaces or keys (default ${DEFAULT_WORKSPACE.name}:${DEFAULT_WORKSPACE.key})`,
      (value: string, previous?: WorkspaceSpec[]) => workspaceSpec(value, previous),
    )
    .option(
      '--records <n>',
      'seeded deals, leads and contacts (each) per workspace',
      wholeNumber(0),
      DEFAULTS.sim.records,
    )
    .option(
      '--seed <n>',
      'seed of the generated data: the same seed gives the same records',
      wholeNumber(0),
      DEFAULTS.sim.seed,
    )
    .option(
      '--rate <limit>',
      'per-workspace rate limit (token bucket), e.g. 50/s, 100/10s, 3000/min; over it → 429 + Retry-After (default unlimited)',
      rate,
    )
    .option('--latency <ms>', 'delay before every answer, in ms', wholeNumber(0), 0)
    .option('--error-rate <p>', 'share of requests answered 500/502/503 without applying (0..1)', probability, 0)
    .option('--reset-rate <p>', 'share of requests whose connection is reset without an answer (0..1)', probability, 0)
    .option(
      '--drop-rate <p>',
      'share of writes applied and then left unanswered, connection dropped (0..1)',
      probability,
      0,
    )
    .addHelpText(
      'after',
      helpFooter(
        `
Workspaces are told apart by the Host header: http://<workspace>.localhost:<port>/api/external, or http://<workspace>.<name>:<port>/api/external with --domain <name> (on a container network, give the simulator those names as aliases: acme.sim).

Examples:
  crm-sync sim --port 4010 --workspace acme:KEY --workspace globex:KEY2 --records 1000 --seed 7 --rate 50/s
  SIM_KEY_ACME=... crm-sync sim --workspace acme:env:SIM_KEY_ACME

With name:env:VARIABLE the key stays out of the process list.`,
      ),
    )
    .action(async (o: SimCommandOptions, command: Command) => (await actions()).runSim(o, command));
}
