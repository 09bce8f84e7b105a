// What `sim` accepts, shared by its declaration (help, parsing) and its action: light modules
// only, so `sim --help` does not load the simulator (fastify).
import { InvalidArgumentError } from 'commander';
import { isCrmSyncError } from '../errors/index.js';
import { parseRateLimit } from '../sim/light.js';
import type { SimRateLimit } from '../sim/light.js';

/** A workspace and one key for it; `env` names the variable the key came from (never printed then). */
export interface WorkspaceSpec {
  name: string;
  key: string;
  env?: string;
}

export interface SimCommandOptions {
  port: number;
  host: string;
  domain?: string;
  workspace?: WorkspaceSpec[];
  records: number;
  seed: number;
  rate?: SimRateLimit;
  latency: number;
  errorRate: number;
  resetRate: number;
  dropRate: number;
}

export const DEFAULT_WORKSPACE: WorkspaceSpec = { name: 'acme', key: 'sim-key-acme' };

export function wholeNumber(min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`must be a whole number of ${min} or more`);
    return n;
  };
}

export function probability(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new InvalidArgumentError('must be a number from 0 to 1');
  return n;
}

/** A DNS name of lower-case labels (a-z, 0-9, -), e.g. `sim` or `crm.test`. */
const DNS_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

export function dnsDomain(value: string): string {
  const domain = value.trim().toLowerCase().replace(/\.$/, '');
  if (!DNS_NAME.test(domain) || /^[0-9.]+$/.test(domain))
    throw new InvalidArgumentError('must be a DNS name such as sim or crm.test (not an address)');
  return domain;
}

const ENV_KEY = /^env:([A-Za-z_][A-Za-z0-9_]*)$/;

/**
 * `NAME:KEY`, or `NAME:env:VARIABLE` to read the key from the environment — so it stays out of
 * argv, which `ps` and `docker inspect` show to anyone on the host.
 */
export function workspaceSpec(
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

export function rate(value: string): SimRateLimit {
  try {
    return parseRateLimit(value);
  } catch (err) {
    throw new InvalidArgumentError(isCrmSyncError(err) ? err.message : String(err));
  }
}
