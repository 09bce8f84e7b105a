import { InvalidArgumentError, type Command } from 'commander';
import { createLogger } from '../log/index.js';
import { CrmSyncError, isCrmSyncError } from '../errors/index.js';
import { parseRateLimit, startSimulator, type SimRateLimit, type SimWorkspaceOptions } from '../sim/index.js';
import type { GlobalOptions } from './context.js';

/** A workspace and one key for it; `env` names the variable the key came from (never printed then). */
interface WorkspaceSpec {
  name: string;
  key: string;
  env?: string;
}

interface SimCommandOptions {
  port: number;
  host: string;
  workspace?: WorkspaceSpec[];
  records: number;
  seed: number;
  rate?: SimRateLimit;
  latency: number;
  errorRate: number;
  resetRate: number;
  dropRate: number;
}

const DEFAULT_WORKSPACE: WorkspaceSpec = { name: 'acme', key: 'sim-key-acme' };

function wholeNumber(min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`must be a whole number of ${min} or more`);
    return n;
  };
}

function probability(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new InvalidArgumentError('must be a number from 0 to 1');
  return n;
}

const ENV_KEY = /^env:([A-Za-z_][A-Za-z0-9_]*)$/;

/**
 * `NAME:KEY`, or `NAME:env:VARIABLE` to read the key from the environment — so it stays out of
 * argv, which `ps` and `docker inspect` show to anyone on the host.
 */
function workspaceSpec(
  value: string,
  previous: WorkspaceSpec[] = [],
  env: NodeJS.ProcessEnv = process.env,
): WorkspaceSpec[] {
  const at = value.indexOf(':');
  const name = value.slice(0, at).trim().toLowerCase();
  const rest = value.slice(at + 1);
  if (at < 1 || rest === '')
    throw new InvalidArgumentError('must be NAME:API_KEY or NAME:env:VARIABLE, e.g. acme:sim-key-acme');
  const fromEnv = ENV_KEY.exec(rest)?.[1];
  if (fromEnv === undefined) return [...previous, { name, key: rest }];
  const key = env[fromEnv];
  if (key === undefined || key === '')
    throw new InvalidArgumentError(`env variable ${fromEnv} (the key of workspace ${name}) is not set`);
  return [...previous, { name, key, env: fromEnv }];
}

function rate(value: string): SimRateLimit {
  try {
    return parseRateLimit(value);
  } catch (err) {
    throw new InvalidArgumentError(isCrmSyncError(err) ? err.message : String(err));
  }
}

/** Keys given twice for one workspace name add up: `--workspace acme:K1 --workspace acme:K2`. */
function workspaces(o: SimCommandOptions, specs: WorkspaceSpec[]): SimWorkspaceOptions[] {
  const byName = new Map<string, SimWorkspaceOptions>();
  for (const { name, key } of specs) {
    const ws = byName.get(name) ?? { name, apiKeys: [], records: o.records, seed: o.seed, rateLimit: o.rate ?? null };
    ws.apiKeys.push(key);
    byName.set(name, ws);
  }
  return [...byName.values()];
}

/** How the banner shows a key: as given on the command line, or only the variable it came from. */
function shownKey(spec: WorkspaceSpec): string {
  return spec.env !== undefined ? `$${spec.env}` : spec.key;
}

function waitForSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const done = (signal: NodeJS.Signals) => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolve(signal);
    };
    process.on('SIGINT', done);
    process.on('SIGTERM', done);
  });
}

/** `crm-sync sim`: runs the CRM simulator until SIGINT/SIGTERM. */
export function registerSimCommand(program: Command): void {
  program
    .command('sim')
    .description(
      'run the CRM simulator: a local stand-in for the CRM API (spec-faithful, seeded data, rate limit and fault knobs)',
    )
    .option('--port <n>', 'TCP port to listen on (0 = any free port)', wholeNumber(0), 4010)
    .option('--host <address>', 'interface to listen on', '127.0.0.1')
    .option(
      '--workspace <name:key>',
      `a workspace (its subdomain) and an API key for it, or name:env:VARIABLE to read the key from the environment; repeat for more workspaces or keys (default ${DEFAULT_WORKSPACE.name}:${DEFAULT_WORKSPACE.key})`,
      (value: string, previous?: WorkspaceSpec[]) => workspaceSpec(value, previous),
    )
    .option('--records <n>', 'seeded deals, leads and contacts (each) per workspace', wholeNumber(0), 100)
    .option('--seed <n>', 'seed of the generated data: the same seed gives the same records', wholeNumber(0), 1)
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
      `
Workspaces are told apart by the Host header: http://<workspace>.localhost:<port>/api/external.
Example:
  crm-sync sim --port 4010 --workspace acme:KEY --workspace globex:KEY2 --records 1000 --seed 7 --rate 50/s
  SIM_KEY_ACME=... crm-sync sim --workspace acme:env:SIM_KEY_ACME   (the key stays out of the process list)`,
    )
    .action(async (o: SimCommandOptions, command: Command) => {
      const logger = createLogger({ level: command.optsWithGlobals<GlobalOptions>().logLevel ?? 'info' });
      const specs = o.workspace ?? [DEFAULT_WORKSPACE];
      const list = workspaces(o, specs);
      const sim = await startSimulator({
        port: o.port,
        host: o.host,
        workspaces: list,
        latencyMs: o.latency,
        faults: { errorRate: o.errorRate, resetRate: o.resetRate, commitThenDropRate: o.dropRate },
        logger,
      }).catch((err: unknown) => {
        const code = (err as NodeJS.ErrnoException | undefined)?.code;
        if (code === 'EADDRINUSE')
          throw new CrmSyncError(
            'USAGE',
            `port ${o.port} on ${o.host} is already in use (another simulator?): pick another with --port, or --port 0 for any free one`,
          );
        if (code === 'EADDRNOTAVAIL' || code === 'EACCES')
          throw new CrmSyncError(
            'USAGE',
            `cannot listen on ${o.host}:${o.port} (${code}): choose another --host or --port`,
          );
        throw err;
      });
      const lines = [`CRM simulator listening on ${sim.origin} (Ctrl-C to stop)`];
      for (const ws of list) {
        const keys = specs.filter((s) => s.name === ws.name).map(shownKey);
        lines.push(`  ${ws.name}  base_url ${sim.baseUrl(ws.name)}  X-Api-Key ${keys.join(', ')}`);
      }
      const first = specs[0];
      if (first) {
        // Double quotes when the key is a variable, so the shell expands it.
        const header = first.env !== undefined ? `"X-Api-Key: $${first.env}"` : `'X-Api-Key: ${first.key}'`;
        lines.push('Try:', `  curl -H ${header} '${sim.baseUrl(first.name)}/v2/contacts?page_size=5'`);
      }
      process.stdout.write(`${lines.join('\n')}\n`);
      const signal = await waitForSignal();
      logger.info({ signal }, 'simulator stopping');
      await sim.close();
    });
}
