// What `crm-sync sim` does, loaded by sim-command.ts only when the command runs (its options and
// help are declared there).
import type { Command } from 'commander';
import { createLogger } from '../log/index.js';
import { CrmSyncError } from '../errors/index.js';
import { startSimulator, type SimWorkspaceOptions } from '../sim/index.js';
import type { GlobalOptions } from './context.js';
import { DEFAULT_WORKSPACE, type SimCommandOptions, type WorkspaceSpec } from './sim-arguments.js';

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
export async function runSim(o: SimCommandOptions, command: Command): Promise<void> {
  // Started by a person to try the CLI against: its banner and log lines are read, not shipped.
  const logger = createLogger({
    level: command.optsWithGlobals<GlobalOptions>().logLevel ?? 'info',
    audience: 'person',
  });
  const specs = o.workspace ?? [DEFAULT_WORKSPACE];
  const list = workspaces(o, specs);
  const sim = await startSimulator({
    port: o.port,
    host: o.host,
    domain: o.domain,
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
  // Listening for Ctrl-C before the banner that offers it: a signal sent as soon as the banner is
  // read (a person, a test) would otherwise meet Node's default action and stop the simulator
  // without its stop line or its close.
  const stopped = waitForSignal();
  process.stdout.write(`${lines.join('\n')}\n`);
  const signal = await stopped;
  logger.info({ signal }, 'simulator stopping');
  await sim.close();
}
