import { DEFAULTS } from '../config/index.js';
import { Redis, type RedisOptions } from 'ioredis';
import { CrmSyncError } from '../errors/index.js';
import { createLogger, type Logger } from '../log/index.js';
import { isCluster, type RedisClient } from './redis-client.js';
import { coalesceWrites } from './write-coalescing.js';

/**
 * `worker`: BullMQ workers and anything inside a worker process (the run store there) must ride
 * out a Redis restart, so commands wait for the reconnect (maxRetriesPerRequest: null).
 * `client`: producers and CLI commands fail fast instead of hanging when Redis is gone.
 */
export type RedisRole = 'worker' | 'client';

export interface ConnectRedisOptions {
  role: RedisRole;
  /** Client name shown by `CLIENT LIST`. Default `crm-sync`. */
  name?: string;
  /** How long to wait for the first connection. Default DEFAULTS.redis.connectTimeoutMs (5000 ms). */
  connectTimeoutMs?: number;
  /**
   * Client-side limit on every command (ioredis `commandTimeout`), both roles. Default
   * {@link DEFAULT_COMMAND_TIMEOUT_MS}. Keep it above BullMQ's longest blocking read
   * ({@link BULLMQ_MAX_BLOCK_MS} plus its 1 s watchdog margin): BullMQ's blocking client is a
   * `duplicate()` of this connection and inherits the option.
   */
  commandTimeoutMs?: number;
  /** The liveness watchdog's timing (see {@link watchRedisLiveness}), or `false` for none. Default on. */
  liveness?: false | { intervalMs?: number; timeoutMs?: number };
  /**
   * Where the worker-role liveness watchdog logs. Default: a stderr logger made on first use
   * (a hung worker must not be silent); {@link redisLiveness}(redis).setLogger() changes it later.
   */
  logger?: Logger;
}

/** Default client-side command timeout of worker-role connections. */
export const DEFAULT_COMMAND_TIMEOUT_MS = DEFAULTS.redis.commandTimeoutMs;
/**
 * BullMQ's longest blocking read: `RedisQueueBackend#maximumBlockTimeout` is 10 s (BZPOPMIN in
 * `waitForJob`), raced against its own watchdog at block + 1 s. A command timeout at or below that
 * would reject healthy idle BZPOPMINs.
 */
export const BULLMQ_MAX_BLOCK_MS = 10_000;

/** The URL with any password replaced, for messages. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

/**
 * What to do about a Redis that did not answer, from why: a refused password and a certificate
 * Node does not trust (a managed Redis behind `rediss://`) are fixed in REDIS_URL and
 * NODE_EXTRA_CA_CERTS, not by starting a Redis.
 */
export function unreachableAdvice(reason: string): string {
  if (/WRONGPASS|NOAUTH|invalid password|AUTH.*(called|failed)/i.test(reason))
    return 'The server wants a password that REDIS_URL does not give, or gives wrong: rediss://:<password>@host:port (or rediss://<user>:<password>@… for an ACL user).';
  if (/certificate|self[- ]signed|CERT_|unable to (verify|get)|SSL|TLS|wrong version number|EPROTO/i.test(reason))
    return (
      'TLS: a rediss:// URL needs a server certificate Node trusts; give its CA with NODE_EXTRA_CA_CERTS=/path/to/ca.pem, ' +
      'and the host name the certificate names (or use redis:// for a server without TLS).'
    );
  return 'Start one (redis-server) or set REDIS_URL.';
}

export function redisOptions(
  role: RedisRole,
  name = 'crm-sync',
  tuning: { commandTimeoutMs?: number } = {},
): RedisOptions {
  return {
    connectionName: name,
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    enableOfflineQueue: role === 'worker',
    // Reconnect forever with a capped delay: a worker outlives a Redis restart.
    retryStrategy: (times) => Math.min(200 * 2 ** Math.min(times, 6), 5000),
    lazyConnect: true,
    // A CLI command or producer on a half-open socket (partition, lost NAT state) ends with
    // "Command timed out" instead of hanging; the worker role's reasons are below.
    commandTimeout: tuning.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
    ...(role === 'worker'
      ? {
          // A command whose answer was lost is NOT re-sent after a reconnect. ioredis's default
          // (true) moves the unanswered commands of a connection that dropped while ready into
          // `prevCommandQueue` and writes them again once the new connection is ready
          // (built/redis/event_handler.js closeHandler/readyHandler), even those whose caller
          // already got "Command timed out". Our Lua writes are fenced, but a replay can still land
          // after another worker took the job over. With it off, ioredis drops `prevCommandQueue`
          // without rejecting those promises (readyHandler: `self.prevCommandQueue = null`)...
          autoResendUnfulfilledCommands: false,
          // ...so this bound is what settles them ("Command timed out"), and it is what ends a
          // command stuck on a half-open socket. It is armed once, when the command is first
          // queued (offline queue included), so a worker's command no longer waits out a Redis
          // outage longer than this: callers (BullMQ's loops, our sweeps) retry. It must stay above
          // BullMQ's 10 s BZPOPMIN (+1 s watchdog): BullMQ duplicate()s this connection, options
          // included, for its blocking client.
        }
      : {}),
  };
}

/**
 * Connects and waits until Redis answers, or throws REDIS_UNAVAILABLE saying how to fix it.
 * Every connection also gets a liveness watchdog ({@link watchRedisLiveness}); it stops
 * by itself when the client ends (`disconnect()`/`quit()`), and {@link redisLiveness} finds it.
 */
export async function connectRedis(url: string, options: ConnectRedisOptions): Promise<Redis> {
  const tuning = options.commandTimeoutMs !== undefined ? { commandTimeoutMs: options.commandTimeoutMs } : {};
  const redis = new Redis(url, redisOptions(options.role, options.name, tuning));
  coalesceWrites(redis);
  await untilReady(
    redis,
    options.connectTimeoutMs ?? DEFAULTS.redis.connectTimeoutMs,
    (reason) => `Redis at ${redactRedisUrl(url)} is not reachable (${reason}). ${unreachableAdvice(reason)}`,
  );
  // Both roles: a producer behind a half-open socket recovers too (its steps are repeatable).
  if (options.liveness !== false) {
    watchRedisLiveness(redis, { ...(options.liveness ?? {}), ...(options.logger ? { logger: options.logger } : {}) });
  }
  return redis;
}

/**
 * Connects and PINGs within `timeoutMs`, or disconnects and throws REDIS_UNAVAILABLE with
 * `explain(reason)`. Leaves an error listener behind so ioredis does not print unhandled errors
 * while it reconnects later.
 */
export async function untilReady(
  client: RedisClient,
  timeoutMs: number,
  explain: (reason: string) => string,
): Promise<void> {
  let lastError: Error | undefined;
  const onError = (err: Error) => {
    lastError = err;
  };
  client.on('error', onError);
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), timeoutMs).unref()),
    ]);
    await client.ping();
  } catch (err) {
    client.disconnect();
    throw new CrmSyncError('REDIS_UNAVAILABLE', explain(lastError?.message ?? (err as Error).message), { cause: err });
  }
  client.off('error', onError);
  client.on('error', () => undefined);
}

export interface RedisLivenessOptions {
  /** Period of the PING probe. Default DEFAULTS.redis.livenessIntervalMs (5000 ms). */
  intervalMs?: number;
  /** A probe not answered within this means the connection is dead. Default DEFAULTS.redis.livenessTimeoutMs (5000 ms). */
  timeoutMs?: number;
  /** Default: a stderr logger made on first use. */
  logger?: Logger;
}

export interface RedisLiveness {
  /** Clears every timer and listener. Idempotent; also happens by itself when the client ends. */
  stop(): void;
  /** Sends the watchdog's lines to this logger from now on. */
  setLogger(logger: Logger): void;
}

const watchdogs = new WeakMap<RedisClient, RedisLiveness>();

/** The liveness watchdog watching this client (started by `connectRedis` for the worker role), if any. */
export function redisLiveness(redis: RedisClient): RedisLiveness | undefined {
  return watchdogs.get(redis);
}

/** ioredis' own defaults, for describing a client whose options leave them out. */
const IOREDIS_DEFAULT_TARGET = { host: 'localhost', port: 6379 };

/** Where the client points, without credentials (options never carry the password into it). */
function describeRedis(redis: Redis): string {
  const o = redis.options;
  if (o.path) return `unix://${o.path}`;
  // Not our settings: what ioredis itself connects to when its options name no host or port.
  const host = o.host ?? IOREDIS_DEFAULT_TARGET.host;
  const port = o.port ?? IOREDIS_DEFAULT_TARGET.port;
  return `${o.tls ? 'rediss' : 'redis'}://${host}:${port}${o.db ? `/${o.db}` : ''}`;
}

/**
 * Liveness watchdog for a long-lived connection. A half-open TCP connection (peer gone, no FIN or
 * RST: a blackholed network, a dead NAT entry) looks `ready` to ioredis for ever; commands only
 * time out one by one (commandTimeout) and nothing reconnects. Every `intervalMs` this sends a
 * PING; if no answer comes within `timeoutMs` it logs one warning and forces a reconnect
 * (`redis.disconnect(true)`: ioredis keeps its retry strategy and reconnects; the dead socket is
 * ended and destroyed after ioredis's `disconnectTimeout`, 2 s by default). When a PING is
 * answered again it logs how long the connection was gone. While ioredis itself is reconnecting
 * (status not `ready`) it only warns, once, if that lasts longer than `timeoutMs`.
 *
 * Do not issue blocking commands (BZPOPMIN…) on a watched connection: the PING would queue behind
 * them. BullMQ does not: it duplicates the connection for its blocking reads.
 *
 * Timers are unref'd, it never throws, and it stops by itself on the client's `end` event.
 */
export function watchRedisLiveness(redis: Redis, options: RedisLivenessOptions = {}): RedisLiveness {
  const intervalMs = options.intervalMs ?? DEFAULTS.redis.livenessIntervalMs;
  const timeoutMs = options.timeoutMs ?? DEFAULTS.redis.livenessTimeoutMs;
  let logger = options.logger;
  const target = describeRedis(redis);
  let stopped = false;
  /** Bumped on every `ready`: a probe sent on an earlier connection proves nothing either way. */
  let epoch = 0;
  let probe: { timer: NodeJS.Timeout; epoch: number } | undefined;
  /** Start of the outage we warned about; undefined while healthy. */
  let downSince: number | undefined;
  /** First tick that found ioredis not ready (reconnecting on its own). */
  let notReadySince: number | undefined;
  /** The epoch we last forced a reconnect in: the dead socket takes up to `disconnectTimeout` to close. */
  let forcedEpoch = -1;

  const log = (level: 'warn' | 'info' | 'debug', fields: Record<string, unknown>, msg: string): void => {
    try {
      logger ??= createLogger();
      logger[level]({ redis: target, ...fields }, msg);
    } catch {
      // A broken logger must not take the watchdog (or the process) down.
    }
  };

  const markDown = (since: number, wantForce: boolean): void => {
    // One forced reconnect per connection: until ioredis has closed the ended socket (status is
    // still `ready` meanwhile) a second disconnect(true) would only end it again.
    const force = wantForce && forcedEpoch !== epoch;
    if (force) forcedEpoch = epoch;
    const first = downSince === undefined;
    downSince ??= since;
    const ms = Date.now() - downSince;
    if (first) {
      log(
        'warn',
        { unresponsiveMs: ms, status: redis.status },
        force
          ? `Redis connection unresponsive for ${ms} ms: forcing a reconnect`
          : `Redis connection unresponsive for ${ms} ms: waiting for the reconnect`,
      );
    } else if (force) {
      log(
        'debug',
        { unresponsiveMs: ms, status: redis.status },
        'Redis connection still unresponsive: forcing a reconnect',
      );
    }
    if (force) {
      try {
        redis.disconnect(true);
      } catch {
        // ioredis does not throw here; belt and braces for "never throws".
      }
    }
  };

  const markUp = (): void => {
    notReadySince = undefined;
    if (downSince === undefined) return;
    const ms = Date.now() - downSince;
    downSince = undefined;
    log('info', { downMs: ms }, `Redis connection back after ${ms} ms`);
  };

  const dropProbe = (): void => {
    if (probe) clearTimeout(probe.timer);
    probe = undefined;
  };

  const runProbe = (): void => {
    try {
      if (stopped || probe) return;
      if (redis.status === 'end') return stop();
      if (redis.status !== 'ready') {
        notReadySince ??= Date.now();
        if (Date.now() - notReadySince >= timeoutMs) markDown(notReadySince, false);
        return;
      }
      notReadySince = undefined;
      const started = Date.now();
      const current = {
        epoch,
        timer: setTimeout(() => {
          try {
            if (probe !== current || stopped) return;
            probe = undefined;
            if (current.epoch !== epoch) {
              // The connection was replaced meanwhile and the PING went down with the old one.
              runProbe();
              return;
            }
            // Only force while ioredis still believes in this socket; otherwise it is already reconnecting.
            markDown(started, redis.status === 'ready' || redis.status === 'connect');
          } catch {
            // never throws
          }
        }, timeoutMs),
      };
      current.timer.unref();
      probe = current;
      const answered = (): void => {
        if (probe === current) dropProbe();
        if (!stopped) markUp();
      };
      redis.ping().then(answered, (err: unknown) => {
        // An error reply (LOADING, NOAUTH…) is still a round trip; a timeout or a closed connection is not.
        if ((err as Error | undefined)?.name === 'ReplyError') answered();
      });
    } catch {
      // never throws
    }
  };

  const onReady = (): void => {
    epoch += 1;
    if (downSince === undefined || stopped) return;
    // Confirm the new connection with a PING now rather than at the next tick.
    if (probe && probe.epoch !== epoch) dropProbe();
    runProbe();
  };

  const interval = setInterval(runProbe, intervalMs);
  interval.unref();

  function stop(): void {
    if (stopped) return;
    stopped = true;
    clearInterval(interval);
    dropProbe();
    redis.off('ready', onReady);
    redis.off('end', stop);
    if (watchdogs.get(redis) === handle) watchdogs.delete(redis);
  }

  const handle: RedisLiveness = {
    stop,
    setLogger(next) {
      logger = next;
    },
  };
  redis.on('ready', onReady);
  redis.on('end', stop);
  watchdogs.get(redis)?.stop();
  watchdogs.set(redis, handle);
  if (redis.status === 'end') stop();
  return handle;
}

/**
 * Refuses a Redis that evicts keys: an evicted job or result is a row lost without a word (a run
 * stuck at 20,200 of 40,000, workers looping on job data that is gone). Managed services that
 * forbid INFO are let through: nothing can be read, so nothing is claimed.
 */
export async function refuseEvictingRedis(redis: RedisClient): Promise<void> {
  let info: string;
  try {
    info = await redis.info('memory');
  } catch {
    return;
  }
  const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
  if (policy === undefined || policy === 'noeviction') return;
  throw new CrmSyncError(
    'REDIS_EVICTS',
    `Redis evicts keys under memory pressure (maxmemory-policy ${policy}): queued rows and results could disappear. ` +
      'Set maxmemory-policy noeviction (redis.conf, or CONFIG SET maxmemory-policy noeviction) and give Redis room; crm-sync stops cleanly when Redis is full.',
  );
}

/**
 * A Redis Cluster node reached through REDIS_URL answers MOVED for keys of other nodes' slots,
 * deep inside BullMQ and the run store's scripts; refused at start-up with a word on how to name
 * the cluster instead. A Cluster client is what a cluster needs, and passes.
 */
export async function refuseRedisCluster(redis: RedisClient): Promise<void> {
  if (isCluster(redis)) return;
  let info: string;
  try {
    info = await redis.info('cluster');
  } catch {
    return;
  }
  if (!/^cluster_enabled:1/m.test(info)) return;
  throw new CrmSyncError(
    'REDIS_CLUSTER',
    'REDIS_URL points at a node of a Redis Cluster (cluster_enabled:1): name the cluster instead with ' +
      'REDIS_CLUSTER_NODES=host:port,host:port (seed nodes), or "redisCluster": { "nodes": [...] } in the config file.',
  );
}
