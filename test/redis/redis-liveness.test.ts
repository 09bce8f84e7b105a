import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { RedisQueueBackend } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BULLMQ_MAX_BLOCK_MS,
  connectRedis,
  DEFAULT_COMMAND_TIMEOUT_MS,
  redisLiveness,
  redisOptions,
  refuseEvictingRedis,
  watchRedisLiveness,
} from '../../src/redis/index.js';
import { deleteKeysWithPrefix, startPrivateRedis } from '../../src/runtime/index.js';
import { captureLogger, type LogLine } from '../helpers/log-capture.js';
import { TEST_REDIS_URL, testRedisAddress, testRedisUrlVia } from '../helpers/redis.js';

/**
 * A worker-role connection against a real Redis behind a half-open network: a TCP proxy on
 * loopback whose blackhole keeps every socket open but lets nothing through, like a partition
 * that sends no FIN or RST.
 */

const target = new URL(TEST_REDIS_URL);
const prefix = `test-liveness-${randomBytes(4).toString('hex')}`;
/** Small values so the suite stays fast; production defaults are 15 s / 5 s / 5 s. */
const COMMAND_TIMEOUT_MS = 1500;
const LIVENESS = { intervalMs: 200, timeoutMs: 500 };

interface Proxy {
  /** REDIS_URL with the host and port of the proxy (credentials and db kept). */
  url: string;
  port: number;
  /**
   * Nothing passes either way and nothing is closed. Bytes are DROPPED, not held: a held INCR
   * delivered on heal() would run on Redis (a late network delivery, not an ioredis replay) and
   * the "not re-sent" test could not tell the two apart. A FIN from either side is swallowed too.
   */
  blackhole(): void;
  heal(): void;
  close(): Promise<void>;
}

async function startProxy(): Promise<Proxy> {
  const { host: upstreamHost, port: upstreamPort } = testRedisAddress();
  let dropping = false;
  const sockets = new Set<Socket>();
  // allowHalfOpen: a client's FIN must not be answered by the proxy itself during a blackhole.
  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = connect({ host: upstreamHost, port: upstreamPort, allowHalfOpen: true });
    sockets.add(client);
    sockets.add(upstream);
    const kill = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('data', (chunk) => {
      if (!dropping) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!dropping) client.write(chunk);
    });
    client.on('end', () => {
      if (!dropping) upstream.end();
    });
    upstream.on('end', () => {
      if (!dropping) client.end();
    });
    // Once the client gives up on the socket (ioredis destroys it after disconnectTimeout), the
    // upstream side goes too: its bytes were dropped, so Redis saw nothing from it anyway.
    client.on('close', kill);
    upstream.on('close', kill);
    client.on('error', kill);
    upstream.on('error', kill);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('proxy did not bind');
  return {
    url: testRedisUrlVia(address.port),
    port: address.port,
    blackhole: () => {
      dropping = true;
    },
    heal: () => {
      dropping = false;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      sockets.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 8000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const WARN = /^Redis connection unresponsive for \d+ ms: forcing a reconnect$/;
const BACK = /^Redis connection back after \d+ ms$/;

let direct: Redis;
beforeAll(async () => {
  direct = new Redis(target.toString(), { lazyConnect: true, maxRetriesPerRequest: 1 });
  await direct.connect();
});
afterAll(async () => {
  await deleteKeysWithPrefix(direct, prefix);
  await direct.quit();
});

async function workerBehind(proxy: Proxy, logger: Logger): Promise<Redis> {
  return connectRedis(proxy.url, {
    role: 'worker',
    name: 'crm-sync-liveness-test',
    commandTimeoutMs: COMMAND_TIMEOUT_MS,
    liveness: LIVENESS,
    logger,
  });
}

/** Blackholes, lets `command` time out, heals, and waits until the watchdog saw the connection back. */
async function outage(proxy: Proxy, redis: Redis, lines: LogLine[], command: () => Promise<unknown>) {
  expect(await redis.ping()).toBe('PONG');
  proxy.blackhole();
  const started = Date.now();
  const err = await command().then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  const settledMs = Date.now() - started;
  const warn = await waitFor('the unresponsive warning', () => lines.find((l) => WARN.test(l.msg)));
  proxy.heal();
  const back = await waitFor('the back line', () => lines.find((l) => BACK.test(l.msg)));
  return { err, settledMs, warn, back };
}

describe('worker-role connection options', () => {
  it('turns off the replay of unanswered commands and bounds every command, above BullMQ blocking reads', () => {
    const worker = redisOptions('worker', 'w');
    expect(worker.autoResendUnfulfilledCommands).toBe(false);
    expect(worker.commandTimeout).toBe(DEFAULT_COMMAND_TIMEOUT_MS);
    expect(redisOptions('worker', 'w', { commandTimeoutMs: 20_000 }).commandTimeout).toBe(20_000);
    const client = redisOptions('client', 'c');
    // Producers and CLI commands are bounded too: a half-open socket ends in "Command timed out".
    expect(client.commandTimeout).toBe(DEFAULT_COMMAND_TIMEOUT_MS);
    expect(client.autoResendUnfulfilledCommands).toBeUndefined();
    // BullMQ caps BZPOPMIN at maximumBlockTimeout seconds and races it against a watchdog at +1 s.
    const maxBlockS = Object.getOwnPropertyDescriptor(RedisQueueBackend.prototype, 'maximumBlockTimeout')?.get?.call(
      {},
    ) as number;
    expect(maxBlockS * 1000).toBe(BULLMQ_MAX_BLOCK_MS);
    expect(DEFAULT_COMMAND_TIMEOUT_MS).toBeGreaterThan(BULLMQ_MAX_BLOCK_MS + 1000);
    // BullMQ's blocking client is redis.duplicate(): the options travel with it.
    const redis = new Redis({ ...worker, lazyConnect: true });
    const dup = redis.duplicate({ connectionName: 'bull:x' });
    expect(dup.options.commandTimeout).toBe(DEFAULT_COMMAND_TIMEOUT_MS);
    expect(dup.options.autoResendUnfulfilledCommands).toBe(false);
    redis.disconnect();
    dup.disconnect();
  });

  it('starts a watchdog for every connection unless told not to, which stops by itself when the client ends', async () => {
    const { logger } = captureLogger();
    const worker = await connectRedis(target.toString(), { role: 'worker', logger });
    const client = await connectRedis(target.toString(), { role: 'client', logger });
    const bare = await connectRedis(target.toString(), { role: 'client', liveness: false });
    try {
      expect(redisLiveness(worker)).toBeDefined();
      expect(redisLiveness(client)).toBeDefined();
      expect(redisLiveness(bare)).toBeUndefined();
    } finally {
      bare.disconnect();
      client.disconnect();
      worker.disconnect();
    }
    await waitFor('end', () => worker.status === 'end');
    await waitFor('the watchdog to stop', () => redisLiveness(worker) === undefined);
  });
});

describe('a half-open (blackholed) worker connection', { timeout: 15_000 }, () => {
  it('times commands out, warns once, forces a reconnect and logs the way back', async () => {
    const proxy = await startProxy();
    const { logger, lines } = captureLogger();
    const redis = await workerBehind(proxy, logger);
    try {
      // Healthy and idle: the watchdog stays quiet.
      await new Promise((r) => setTimeout(r, 3 * LIVENESS.intervalMs));
      expect(lines).toEqual([]);

      const { err, settledMs, warn, back } = await outage(proxy, redis, lines, () => redis.get(`${prefix}:probe`));
      expect(err?.message).toBe('Command timed out');
      expect(settledMs).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS - 50);
      expect(settledMs).toBeLessThan(COMMAND_TIMEOUT_MS + 1000);
      expect(warn.level).toBe(40);
      expect(warn.redis).toBe(`redis://127.0.0.1:${proxy.port}${target.pathname.length > 1 ? target.pathname : ''}`);
      expect(back.level).toBe(30);
      expect(back.time).toBeGreaterThan(warn.time);
      expect(await redis.ping()).toBe('PONG');
      // One warning per outage, however many probes failed during it.
      expect(lines.filter((l) => l.level === 40)).toHaveLength(1);
      expect(JSON.stringify(lines)).not.toMatch(/password|:\/\/[^@/]*:[^@/]*@/);
    } finally {
      redis.disconnect();
      await proxy.close();
    }
  });

  it('does not re-send an unanswered INCR after the reconnect', async () => {
    const proxy = await startProxy();
    const { logger, lines } = captureLogger();
    const redis = await workerBehind(proxy, logger);
    const key = `${prefix}:incr-worker`;
    try {
      const { err } = await outage(proxy, redis, lines, () => redis.incr(key));
      expect(err?.message).toBe('Command timed out');
      // A re-sent command would be written as soon as the new connection is ready, before this.
      expect(await redis.ping()).toBe('PONG');
      expect(await direct.get(key)).toBeNull();
    } finally {
      redis.disconnect();
      await proxy.close();
    }
  });

  it("control: with ioredis's default autoResendUnfulfilledCommands the same INCR is replayed", async () => {
    const proxy = await startProxy();
    const { logger, lines } = captureLogger();
    const redis = new Redis(proxy.url, {
      ...redisOptions('worker', 'crm-sync-liveness-control', { commandTimeoutMs: COMMAND_TIMEOUT_MS }),
      autoResendUnfulfilledCommands: true,
    });
    redis.on('error', () => undefined);
    await redis.connect();
    const watchdog = watchRedisLiveness(redis, { ...LIVENESS, logger });
    const key = `${prefix}:incr-control`;
    try {
      const { err } = await outage(proxy, redis, lines, () => redis.incr(key));
      // The caller was told it failed...
      expect(err?.message).toBe('Command timed out');
      expect(await redis.ping()).toBe('PONG');
      // ...yet it ran once the connection came back: what the worker option prevents.
      expect(await direct.get(key)).toBe('1');
    } finally {
      watchdog.stop();
      redis.disconnect();
      await proxy.close();
    }
  });
});

describe('a Redis that evicts keys', () => {
  it('is refused at start-up, naming the setting and the fix; noeviction is accepted', async () => {
    const server = await startPrivateRedis();
    const redis = new Redis(server.url);
    try {
      await expect(refuseEvictingRedis(redis)).resolves.toBeUndefined();
      await redis.config('SET', 'maxmemory-policy', 'allkeys-lru');
      await expect(refuseEvictingRedis(redis)).rejects.toMatchObject({
        code: 'REDIS_EVICTS',
        message: expect.stringMatching(/maxmemory-policy allkeys-lru.*CONFIG SET maxmemory-policy noeviction/),
      });
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});
