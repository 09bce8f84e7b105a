import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { DEFAULTS, readSecret, Secret, type Config, type RedisClusterConfig } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import { createLogger } from '../log/index.js';
import type { RedisClient } from './redis-client.js';
import { coalesceWrites } from './write-coalescing.js';
import {
  connectRedis,
  redactRedisUrl,
  redisOptions,
  untilReady,
  type ConnectRedisOptions,
  type RedisRole,
} from './redis-connection.js';

/** Where the config points, for messages (never a password). */
export function describeRedisTarget(config: Pick<Config, 'redisUrl' | 'redisCluster'>): string {
  const cluster = config.redisCluster;
  if (cluster === null) return redactRedisUrl(config.redisUrl);
  return `the Redis Cluster ${cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`;
}

/**
 * The one way a process reaches its Redis: an ioredis `Cluster` when the config names one
 * (REDIS_CLUSTER_NODES / `redisCluster`), else the single Redis at `redisUrl`. Either way it
 * answers before this returns, or REDIS_UNAVAILABLE says how to fix it.
 */
export async function connectConfiguredRedis(
  config: Pick<Config, 'redisUrl' | 'redisCluster'>,
  options: ConnectRedisOptions,
): Promise<RedisClient> {
  return config.redisCluster === null
    ? connectRedis(config.redisUrl, options)
    : connectCluster(config.redisCluster, options);
}

/**
 * Options of a Cluster client. Each node connection gets the role's options (a worker's
 * commands wait out a failover: the slot moves to the promoted replica and ioredis follows the
 * MOVED/refresh; a client's fail fast). The offline queue stays on for both roles: a command
 * sent while the slot map is refreshed waits for it instead of failing.
 */
function clusterOptions(
  target: RedisClusterConfig,
  role: RedisRole,
  name = 'crm-sync',
  tuning: { commandTimeoutMs?: number } = {},
): ClusterOptions {
  const node = redisOptions(role, name, tuning);
  const password =
    target.password === undefined
      ? undefined
      : target.password instanceof Secret
        ? target.password
        : readSecret(target.password, 'Redis Cluster password');
  return {
    lazyConnect: true,
    enableOfflineQueue: true,
    // Reconnect for ever with a capped delay, like a single Redis (`null` would give up).
    clusterRetryStrategy: (times) => Math.min(200 * 2 ** Math.min(times, 6), 5000),
    // A failover: the dead master's slots answer CLUSTERDOWN / connection errors until a replica
    // is promoted (cluster-node-timeout, a few seconds); retry instead of failing the command.
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 300,
    retryDelayOnTryAgain: 200,
    maxRedirections: 64,
    slotsRefreshTimeout: 2000,
    scaleReads: 'master',
    redisOptions: {
      connectionName: node.connectionName,
      maxRetriesPerRequest: node.maxRetriesPerRequest,
      commandTimeout: node.commandTimeout,
      ...(node.autoResendUnfulfilledCommands === false ? { autoResendUnfulfilledCommands: false } : {}),
      ...(target.username !== undefined ? { username: target.username } : {}),
      ...(password !== undefined ? { password: password.reveal() } : {}),
      ...(target.tls ? { tls: {} } : {}),
    },
    // Managed services (ElastiCache…) hand out TLS certificates for the names they announce.
    ...(target.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
  };
}

async function connectCluster(target: RedisClusterConfig, options: ConnectRedisOptions): Promise<Cluster> {
  const tuning = options.commandTimeoutMs !== undefined ? { commandTimeoutMs: options.commandTimeoutMs } : {};
  const clusterOpts = clusterOptions(target, options.role, options.name, tuning);
  const cluster = new Cluster(target.nodes, clusterOpts);
  coalesceWrites(cluster);
  const where = describeRedisTarget({ redisUrl: '', redisCluster: target });
  try {
    await untilReady(
      cluster,
      options.connectTimeoutMs ?? DEFAULTS.redis.connectTimeoutMs,
      (reason) =>
        `${where} is not reachable (${reason}). Check REDIS_CLUSTER_NODES (seed nodes host:port) and that the cluster is up (redis-cli --cluster check).`,
    );
  } catch (err) {
    // ioredis says only "Failed to refresh slots cache" when a seed is a plain Redis: say which.
    throw (await standaloneSeed(target, clusterOpts.redisOptions ?? {})) ?? err;
  }
  // Failovers show up as node errors while ioredis refreshes its slot map: one line each, not a crash.
  const logger = options.logger;
  cluster.on('+node', (node: Redis) => {
    // At start every master joins; later, a joining master is a failover's promoted replica.
    if (cluster.status !== 'ready') return;
    (logger ?? createLogger()).info(
      { redis: where, node: `${node.options.host}:${node.options.port}` },
      'Redis Cluster node joined (a promoted replica or a new master): its slots answer again',
    );
  });
  cluster.on('-node', (node: Redis) => {
    // A client closing on purpose drops every node too: only a node lost while in use is news.
    if (cluster.status !== 'ready') return;
    (logger ?? createLogger()).warn(
      { redis: where, node: `${node.options.host}:${node.options.port}` },
      'Redis Cluster node left (a failover promotes its replica; commands wait for it)',
    );
  });
  return cluster;
}

/**
 * A CONFIG_INVALID error naming the first seed that answers as a standalone Redis
 * (cluster_enabled:0), or null when none does (down, or a cluster that is not ready).
 */
async function standaloneSeed(target: RedisClusterConfig, nodeOptions: RedisOptions): Promise<CrmSyncError | null> {
  for (const { host, port } of target.nodes.slice(0, 3)) {
    const probe = new Redis({
      ...nodeOptions,
      host,
      port,
      lazyConnect: true,
      connectTimeout: 2000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      if (/^cluster_enabled:0/m.test(await probe.info('cluster')))
        return new CrmSyncError(
          'CONFIG_INVALID',
          `the Redis Cluster seed ${host}:${port} (REDIS_CLUSTER_NODES or redisCluster.nodes) is a standalone Redis (cluster support disabled): ` +
            `point REDIS_URL at it instead (redis://${host}:${port}), or name the nodes of a Redis Cluster`,
        );
    } catch {
      // Not answering, or refusing INFO: nothing to tell apart.
    } finally {
      probe.disconnect();
    }
  }
  return null;
}
