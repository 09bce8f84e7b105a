import { z } from 'zod';
import { DEFAULTS } from '../config/index.js';
import type { Logger } from '../log/index.js';

/** Workspace names become the first DNS label of `<name>.localhost`, so they must be valid labels. */
export const WORKSPACE_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Token bucket: capacity `max`, refilled at `max` tokens per `windowMs`. */
export const SimRateLimitSchema = z.object({
  max: z.number().int().min(1),
  windowMs: z.number().int().min(1),
});
export type SimRateLimit = z.infer<typeof SimRateLimitSchema>;

const rate = z.number().min(0).max(1);

/** Probabilities (0..1) of each injected fault, drawn independently per request; a rate left out is 0 (never). */
export const SimFaultsSchema = z.object({
  /** Answer 500/502/503 `{error}` without applying anything. */
  errorRate: rate.default(0),
  /** Destroy the socket without answering and without applying. */
  resetRate: rate.default(0),
  /** Write endpoints only: apply the write, then destroy the socket before answering. */
  commitThenDropRate: rate.default(0),
});
/** Fault rates as a caller gives them (any left out). */
export type SimFaults = z.input<typeof SimFaultsSchema>;
/** Fault rates as the simulator holds them, every one set. */
export type ResolvedSimFaults = z.output<typeof SimFaultsSchema>;

export const SimWorkspaceOptionsSchema = z.object({
  /** Subdomain of the workspace (`acme` → `acme.localhost`). */
  name: z.string().regex(WORKSPACE_NAME, 'must be a lower-case DNS label (a-z, 0-9, -)'),
  /** Keys that authenticate against this workspace only. */
  apiKeys: z.array(z.string().min(1)),
  /** Seeded deals, leads and contacts (each). Default none (the CLI's DEFAULTS.sim.records is its own). */
  records: z.number().int().min(0).default(0),
  /** PRNG seed of the seed data. Default DEFAULTS.sim.seed. */
  seed: z.number().int().default(DEFAULTS.sim.seed),
  /** Per-workspace token bucket. Default null (unlimited). */
  rateLimit: SimRateLimitSchema.nullable().optional(),
  /** Roles `organization_role` may name. Default ['Standard', 'Admin', 'Manager']. */
  roles: z.array(z.string().min(1)).min(1).optional(),
  /**
   * Store values as some CRMs do, other than sent: runs of whitespace in a name collapsed to one
   * space, an email's domain lower-cased (the answer and the list show the stored text). Default
   * false (stored as sent).
   */
  normalise: z.boolean().default(false),
  /**
   * The workspace's pipelines and their stages' names, instead of the seed's (PIPELINES in
   * seed-names.ts, whose stage names are all distinct): a test can give two pipelines a stage
   * of the same name. Ids are drawn from the seed as usual. Default: the seed's.
   */
  pipelines: z
    .array(z.object({ name: z.string().min(1), stages: z.array(z.string().min(1)).min(1) }))
    .min(1)
    .optional(),
});
export type SimWorkspaceOptions = z.input<typeof SimWorkspaceOptionsSchema>;

export interface SimulatorOptions {
  /** TCP port. Default EPHEMERAL_PORT (read it back from `Simulator.port`). */
  port?: number;
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /**
   * A DNS domain under which workspaces answer as well as `<name>.localhost`: `sim` serves
   * `acme.sim`. For clients on another host or container, to whom `*.localhost` is their own
   * loopback (the CRM client resolves it so). Default none.
   */
  domain?: string;
  /** Workspaces served from the start (more can be added with `addWorkspace`). */
  workspaces: SimWorkspaceOptions[];
  /** Delay before every authenticated answer, in ms. Default none. */
  latencyMs?: number;
  /** Global fault rates. Default none. */
  faults?: SimFaults;
  /** Where the simulator logs. Default silent. */
  logger?: Logger;
}

export const DEFAULT_ROLES = ['Standard', 'Admin', 'Manager'] as const;

/** Port 0: the system picks a free one (a simulator per test, no clashes). */
export const EPHEMERAL_PORT = 0;
