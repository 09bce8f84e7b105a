import { getWorkspace, type Config } from '../config/index.js';
import { createCrmClient, type CrmClient, type ListResource } from '../crm/index.js';
import type { Logger } from '../log/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import type { RedisClient } from '../redis/index.js';
import { readReferences, type ReadReferencesResult } from './read-references.js';
import type { ReferenceIndex } from './reference-index.js';
import { ReferenceStore } from './reference-store.js';

export interface WorkspaceReferencesOptions {
  config: Config;
  workspace: string;
  redis: RedisClient;
  logger: Logger;
  /** The client to read with. Default: one made for the read and closed after it. */
  client?: CrmClient;
}

/** The workspace's reference store (its keys under the config's prefix). */
export function referenceStoreOf(config: Config, workspace: string, redis: RedisClient): ReferenceStore {
  return new ReferenceStore({ redis, prefix: config.prefix, workspace });
}

/**
 * Reads the workspace's references as its settings say (the stored passes while younger than
 * `referencesMaxAgeMs`, else one pass per needed list in the workspace's shared budget).
 */
export async function workspaceReferences(
  options: WorkspaceReferencesOptions & { lists: readonly ListResource[]; refresh?: boolean },
): Promise<ReadReferencesResult> {
  const { config, workspace, redis, logger } = options;
  const ws = getWorkspace(config, workspace);
  const client = options.client ?? createCrmClient(config, workspace, logger);
  try {
    return await readReferences({
      client,
      budget: workspaceRequestBudget(redis, config, workspace, client),
      store: referenceStoreOf(config, workspace, redis),
      lists: options.lists,
      maxAgeMs: ws.referencesMaxAgeMs,
      version: ws.listVersion,
      ...(options.refresh ? { refresh: true } : {}),
    });
  } finally {
    if (options.client === undefined) client.close();
  }
}

/** A plain import's LoadReferences (ingest): the workspace's references, read when a mapping names some. */
export function workspaceReferenceLoader(
  options: WorkspaceReferencesOptions,
): (lists: ListResource[]) => Promise<ReferenceIndex> {
  return async (lists) => {
    const { index, pages, read } = await workspaceReferences({ ...options, lists });
    if (pages > 0) options.logger.info({ lists: read, pages }, 'references read for names in the mapping');
    return index;
  };
}
