// What `dashboard` accepts, shared by its declaration (help, parsing) and its action: light
// modules only, so `dashboard --help` does not load fastify.
// defaults.ts itself: config/index.js loads zod, and declaring a command must stay light.
import { DEFAULTS } from '../config/light.js';
import { isIP } from 'node:net';
import { InvalidArgumentError } from 'commander';
import type { DashboardOptions } from '../dashboard/index.js';

export interface DashboardCommandOptions {
  port: number;
  host: string;
  insecureNoAuth?: boolean;
  workspace?: string[];
  trustProxy?: DashboardOptions['trustProxy'];
}

/** The variable the dashboard token is read from first (before the config's). */
export const TOKEN_ENV = DEFAULTS.config.dashboardTokenEnv;

/** `--port`: 0 to 65535. */
export function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError('must be a port number from 0 to 65535');
  return n;
}

/**
 * `true`, or proxy addresses/CIDRs, comma-separated (fastify's trustProxy). No hop counts: this
 * fastify ignores them (a hop count cannot tell the proxy from a client that sends the header).
 */
export function trustProxy(value: string): NonNullable<DashboardOptions['trustProxy']> {
  const v = value.trim();
  if (v === 'true') return true;
  if (v === 'false') return false;
  const parts = v
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  for (const p of parts) {
    if (isIP(p.split('/')[0] ?? '') === 0 && !['loopback', 'linklocal', 'uniquelocal'].includes(p)) {
      throw new InvalidArgumentError(
        'must be true, or the addresses/CIDRs of the proxies, e.g. 10.0.0.0/8,127.0.0.1 (or loopback)',
      );
    }
  }
  return parts;
}
