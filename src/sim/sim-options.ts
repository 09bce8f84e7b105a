import { z } from 'zod';
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

/** Probabilities (0..1) of each injected fault, drawn independently per request. */
export const SimFaultsSchema = z.object({
  /** Answer 500/502/503 `{error}` without applying anything. Default 0. */
  errorRate: rate.optional(),
  /** Destroy the socket without answering and without applying. Default 0. */
  resetRate: rate.optional(),
  /** Write endpoints only: apply the write, then destroy the socket before answering. Default 0. */
  commitThenDropRate: rate.optional(),
});
export type SimFaults = z.infer<typeof SimFaultsSchema>;

export const SimWorkspaceOptionsSchema = z.object({
  /** Subdomain of the workspace (`acme` → `acme.localhost`). */
  name: z.string().regex(WORKSPACE_NAME, 'must be a lower-case DNS label (a-z, 0-9, -)'),
  /** Keys that authenticate against this workspace only. */
  apiKeys: z.array(z.string().min(1)),
  /** Seeded deals, leads and contacts (each). Default 0. */
  records: z.number().int().min(0).optional(),
  /** PRNG seed of the seed data. Default 1. */
  seed: z.number().int().optional(),
  /** Per-workspace token bucket. Default null (unlimited). */
  rateLimit: SimRateLimitSchema.nullable().optional(),
  /** Roles `organization_role` may name. Default ['Standard', 'Admin', 'Manager']. */
  roles: z.array(z.string().min(1)).min(1).optional(),
});
export type SimWorkspaceOptions = z.infer<typeof SimWorkspaceOptionsSchema>;

export interface SimulatorOptions {
  /** TCP port. Default 0 (an ephemeral port, read it back from `Simulator.port`). */
  port?: number;
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Workspaces served from the start (more can be added with `addWorkspace`). */
  workspaces: SimWorkspaceOptions[];
  /** Delay before every authenticated answer, in ms. Default 0. */
  latencyMs?: number;
  /** Global fault rates. Default none. */
  faults?: SimFaults;
  /** Where the simulator logs. Default silent. */
  logger?: Logger;
}

export const DEFAULT_ROLES = ['Standard', 'Admin', 'Manager'] as const;
