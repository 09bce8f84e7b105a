import { isCluster, type RedisClient } from '../redis/index.js';
import { getWorkspace, type Config } from '../config/index.js';
import {
  AuthError,
  BadResponseError,
  NotFoundError,
  RateLimitedError,
  refusedKeyStatus,
  type CrmClient,
} from '../crm/index.js';
import { errorMessage } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { connectConfiguredRedis, describeRedisTarget } from '../redis/index.js';
import { workerCount } from '../queue/index.js';
import { createCrmClient } from '../crm/index.js';
import { workspaceRequestBudget, type RequestBudget } from '../rate/index.js';

/** One line of `crm-sync check`: ok, a warning (runs, but an operator should know) or a failure. */
export interface CheckLine {
  level: 'ok' | 'warn' | 'fail';
  /** What was checked, e.g. `redis`, `acme: key`. */
  subject: string;
  message: string;
}

/** What one list call told about a workspace's CRM and key. */
export interface KeyCheck {
  /** `ok`: key accepted; `rejected`: 401; `not-crm`: the baseUrl answered, but not like the CRM; `unreachable`: no answer. */
  verdict: 'ok' | 'rejected' | 'not-crm' | 'unreachable';
  message: string;
}

/**
 * Asks the CRM for one deal: the cheapest call that proves the baseUrl answers like the CRM
 * (its list body parses) and that it accepts the key. A 429 counts as accepted: the CRM checks
 * the key first (a rejected key is told 401 whatever the rate). With `budget` (the workspace's
 * one request budget), the probe takes its token first, as every CRM request does.
 */
export async function checkKey(client: CrmClient, budget?: RequestBudget, signal?: AbortSignal): Promise<KeyCheck> {
  await budget?.take(signal);
  try {
    await client.listPage('deals', { pageNumber: 1, pageSize: 1, ...(signal ? { signal } : {}) });
    return { verdict: 'ok', message: `${client.baseUrl} answered like the CRM and accepted the key` };
  } catch (err) {
    if (err instanceof RateLimitedError)
      return { verdict: 'ok', message: `${client.baseUrl} accepted the key (and asked to slow down: 429)` };
    if (err instanceof AuthError)
      return {
        verdict: 'rejected',
        message: `the CRM refused the API key (HTTP ${refusedKeyStatus(err)}: ${err.serviceMessage ?? 'unauthorized'})`,
      };
    if (err instanceof NotFoundError) {
      return {
        verdict: 'not-crm',
        message: `${client.baseUrl} answered 404 to the deal list (${err.serviceMessage ?? 'not found'}): is the baseUrl right (scheme, host, path)?`,
      };
    }
    if (err instanceof BadResponseError)
      return { verdict: 'not-crm', message: `${client.baseUrl} answered, but not like the CRM: ${err.message}` };
    return { verdict: 'unreachable', message: `${client.baseUrl} did not answer: ${errorMessage(err)}` };
  }
}

export interface PreflightOptions {
  config: Config;
  logger: Logger;
  /** Default: every configured workspace. */
  workspaces?: string[];
}

/**
 * `crm-sync check`: Redis reachable (warning on an evicting maxmemory-policy and on no
 * persistence), every workspace's key accepted and baseUrl answering like the CRM, and workers
 * serving its queue. The config itself was validated when it was loaded.
 */
export async function preflight(options: PreflightOptions): Promise<CheckLine[]> {
  const { config, logger } = options;
  const lines: CheckLine[] = [
    {
      level: 'ok',
      subject: 'config',
      message: `${config.source ?? 'environment'} is valid (${workspaceCount(Object.keys(config.workspaces).length)})`,
    },
  ];
  const names = options.workspaces?.length ? options.workspaces : Object.keys(config.workspaces);
  let redis: RedisClient | undefined;
  try {
    redis = await connectConfiguredRedis(config, { role: 'client', name: 'crm-sync-check' });
    lines.push(...(await redisLines(redis, describeRedisTarget(config))));
  } catch (err) {
    lines.push({
      level: 'fail',
      subject: 'redis',
      message: `${describeRedisTarget(config)} cannot be reached: ${errorMessage(err)}`,
    });
    redis?.disconnect();
    redis = undefined;
  }
  try {
    for (const name of names) {
      getWorkspace(config, name);
      let client: CrmClient | undefined;
      try {
        client = createCrmClient(config, name, logger);
        // Without Redis there is no shared budget to take from: one request is sent all the same.
        const key = await checkKey(client, redis ? workspaceRequestBudget(redis, config, name, client) : undefined);
        lines.push({ level: key.verdict === 'ok' ? 'ok' : 'fail', subject: `${name}: crm`, message: key.message });
      } catch (err) {
        // SECRET_MISSING: the key's env variable or file is not there.
        lines.push({ level: 'fail', subject: `${name}: key`, message: errorMessage(err) });
      } finally {
        client?.close();
      }
      if (redis) {
        const workers = await workerCount(redis, config.prefix, name);
        lines.push(
          workers > 0
            ? { level: 'ok', subject: `${name}: workers`, message: `${workers} worker processes serve the workspace` }
            : {
                level: 'warn',
                subject: `${name}: workers`,
                message: `no worker serves the workspace: rows wait until one starts (crm-sync worker -w ${name})`,
              },
        );
      }
    }
  } finally {
    redis?.disconnect();
  }
  return lines;
}

async function redisLines(redis: RedisClient, where: string): Promise<CheckLine[]> {
  const lines: CheckLine[] = [];
  const [memory, persistence, server] = await Promise.all([
    redis.info('memory'),
    redis.info('persistence'),
    redis.info('server'),
  ]);
  const version = /^redis_version:(\S+)/m.exec(server)?.[1] ?? '?';
  lines.push({ level: 'ok', subject: 'redis', message: `${where} answers (Redis ${version})` });
  if (isCluster(redis)) {
    // The settings below are read from one node; a cluster's nodes are expected to share them.
    // CLUSTER NODES, not the client's node list: the client connects to masters only.
    const flags = String(await redis.cluster('NODES'))
      .split('\n')
      .map((line) => line.split(' ')[2] ?? '')
      .filter((f) => f !== '' && !f.includes('fail'));
    const masters = flags.filter((f) => f.split(',').includes('master')).length;
    const replicas = flags.filter((f) => f.split(',').includes('slave')).length;
    lines.push({
      level: replicas >= masters ? 'ok' : 'warn',
      subject: 'redis',
      message:
        `Redis Cluster: ${masters} masters, ${replicas} replicas` +
        (replicas >= masters ? '' : ': a master without a replica cannot fail over, its workspaces stop with it'),
    });
  }
  const policy = /^maxmemory_policy:(\S+)/m.exec(memory)?.[1];
  if (policy !== undefined && policy !== 'noeviction') {
    lines.push({
      level: 'warn',
      subject: 'redis',
      message: `maxmemory-policy is ${policy}: Redis may evict queued rows and results; workers refuse to start until it is noeviction`,
    });
  }
  const aof = /^aof_enabled:(\d)/m.exec(persistence)?.[1] === '1';
  let rdb: boolean | undefined;
  try {
    const save = (await redis.config('GET', 'save')) as string[];
    rdb = (save[1] ?? '').trim() !== '';
  } catch {
    // CONFIG is often disabled on managed Redis: the snapshot schedule cannot be read there.
    rdb = undefined;
  }
  if (!aof && rdb === false) {
    lines.push({
      level: 'warn',
      subject: 'redis',
      message: 'no persistence (no AOF, no RDB snapshots): a Redis restart loses every queued row and result',
    });
  }
  return lines;
}

/** `1 workspace`, `2 workspaces`. */
function workspaceCount(n: number): string {
  return `${n} workspace${n === 1 ? '' : 's'}`;
}
