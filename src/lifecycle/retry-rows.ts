import { derivedSettings, getWorkspace, type Config } from '../config/index.js';
import { silentLogger } from '../log/index.js';
import type { WorkspaceQueue } from '../queue/index.js';
import { workspaceReferenceLoader } from '../references/index.js';
import { retryRun, type RetryRunOptions, type RetrySummary } from './retry-run.js';

/** What a retry takes from the config rather than from its caller. */
export interface RetrySettings {
  /** The config's retention: how long a create marker the retry puts back lives. */
  retentionMs: number;
  /** The run's workspace's `requireApproval`: a corrected file is refused there. */
  requireApproval: boolean;
}

export interface RetryRowsOptions extends Omit<RetryRunOptions, 'queue' | 'loadReferences' | keyof RetrySettings> {
  /** The config the retry's settings come from (retrySettings), and its reference index's. */
  config: Config;
  /** The queue of the run's workspace (Runtime#queue). */
  queueFor: (workspace: string) => WorkspaceQueue;
}

/** A retry's settings for a run of `workspace`, read from the config in this one place. */
export function retrySettings(config: Config, workspace: string): RetrySettings {
  return {
    retentionMs: derivedSettings(config).retentionMs,
    requireApproval: getWorkspace(config, workspace).requireApproval,
  };
}

/**
 * The retry a person asks for — `runs retry` (after its drift re-plan), the dashboard's Retry
 * button and its corrected upload: one path, so every caller retries with the same settings
 * (a dashboard retry once restored create markers of the default life, not the config's).
 */
export async function retryRows(options: RetryRowsOptions): Promise<RetrySummary> {
  const { config, queueFor, ...rest } = options;
  const run = await rest.store.requireRun(rest.runId);
  // Names in the run's mapping are resolved against the workspace's reference index, as its import did.
  const { redis } = rest.store;
  const loadReferences = workspaceReferenceLoader({
    config,
    workspace: run.workspace,
    redis,
    logger: rest.logger ?? silentLogger,
  });
  return retryRun({
    ...rest,
    queue: queueFor(run.workspace),
    loadReferences,
    ...retrySettings(config, run.workspace),
  });
}
