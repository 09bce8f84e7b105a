import type { RedisClient } from '../redis/index.js';
import { getWorkspace, type Config } from '../config/index.js';
import type { Logger } from '../log/index.js';
import { openWorkspaceQueue, type WorkspaceQueue } from '../queue/index.js';
import { type RedisRole } from '../redis/index.js';
import type { RunStore } from '../runs/index.js';
import { openStore } from './open-store.js';

/** The connected parts a command or process needs, built once from the config. */
export interface Runtime {
  config: Config;
  logger: Logger;
  redis: RedisClient;
  store: RunStore;
  /** The workspace's queue (cached; the workspace must be configured). */
  queue(workspace: string): WorkspaceQueue;
  close(): Promise<void>;
}

export async function openRuntime(config: Config, logger: Logger, role: RedisRole = 'client'): Promise<Runtime> {
  const { redis, store } = await openStore(config, role, logger);
  const queues = new Map<string, WorkspaceQueue>();
  return {
    config,
    logger,
    redis,
    store,
    queue(workspace) {
      let q = queues.get(workspace);
      if (!q) {
        const ws = getWorkspace(config, workspace);
        q = openWorkspaceQueue({
          connection: redis,
          prefix: config.prefix,
          workspace,
          attempts: ws.retry.attempts,
          backoffMs: ws.retry.backoffMs,
        });
        queues.set(workspace, q);
      }
      return q;
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
      redis.disconnect();
    },
  };
}

export {
  startPrivateRedis,
  findOrStartRedis,
  redisAnswers,
  freePort,
  hasRedisServer,
  type PrivateRedis,
  type PrivateRedisOptions,
} from './local-redis.js';
export { openStore, type OpenStore } from './open-store.js';
export { deleteKeysWithPrefix } from './delete-prefix.js';
export { createCrmClient } from '../crm/index.js';
export { preflight, checkKey, type CheckLine, type KeyCheck, type PreflightOptions } from './preflight.js';
