/**
 * One Redis against a Redis Cluster of 3 masters (issue 19): WORKSPACES configured workspaces on
 * one simulator (10 req/s each, a known limit), 2 worker processes serving all of them, ACTIVE
 * workspaces × 10 req/s × SECONDS of deal updates queued at once. The same load runs on a private
 * redis-server, then on a private 3-master cluster (no replicas, so the masters' work is all
 * there is to compare; the failover test has replicas).
 *
 *   npx tsx bench/redis-cluster.ts [workspaces=1000] [active=200] [seconds=10]
 *
 * Prints per phase: requests/s end to end, Redis commands per CRM request, commands/s on each
 * master (and max/min between masters), memory each master gained per row, and where the
 * project's keys sit. Last, a sizing line from the measured per-row cost.
 */
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { configFromObject } from '../src/config/index.js';
import { poolsKey } from '../src/keys/index.js';
import { silentLogger } from '../src/log/index.js';
import { METRIC, readCounters } from '../src/metrics/index.js';
import { openRuntime } from '../src/runtime/index.js';
import { startLocalRedisCluster } from '../test/helpers/redis-cluster.js';
import {
  benchConfig,
  cpuSeconds,
  fmt,
  removeBenchDir,
  spawnWorkerProcess,
  startPrivateRedis,
  startSimProcess,
  stopProcesses,
} from './bench-lib.js';
import { fleetWorkspaces, prefetchIds, queueRows, waitAll, workspaceNames } from './fleet-lib.js';

const WORKSPACES = Number(process.argv[2] ?? 1000);
const ACTIVE = Math.min(WORKSPACES, Number(process.argv[3] ?? 200));
const SECONDS = Number(process.argv[4] ?? 10);
const RATE = 10;
const ROWS = RATE * SECONDS;
const names = workspaceNames(WORKSPACES);
const limit = { max: RATE, durationMs: 1000 };

const sim = await startSimProcess({ records: ROWS, rate: `${RATE}/s`, workspaces: names });
await prefetchIds(sim, names.slice(0, ACTIVE));
console.log(
  `Redis Cluster vs one Redis: ${WORKSPACES} workspaces configured, ${ACTIVE} busy × ${ROWS} rows at ${RATE} req/s each, 2 worker processes (concurrency 8)`,
);

interface MasterStats {
  commands: number;
  memory: number;
  keys: number;
  /** CPU seconds the server used so far. */
  cpu: number;
}

async function masterStats(ports: number[]): Promise<Map<number, MasterStats>> {
  const out = new Map<number, MasterStats>();
  for (const port of ports) {
    const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true });
    await r.connect();
    const [stats, memory, keys, server] = [
      await r.info('stats'),
      await r.info('memory'),
      await r.dbsize(),
      await r.info('server'),
    ];
    r.disconnect();
    out.set(port, {
      cpu: cpuSeconds(Number(/process_id:(\d+)/.exec(server)?.[1])),
      commands: Number(/total_commands_processed:(\d+)/.exec(stats)?.[1] ?? 0),
      memory: Number(/used_memory:(\d+)/.exec(memory)?.[1] ?? 0),
      keys,
    });
  }
  return out;
}

const perRow: Array<{ label: string; commandsPerRequest: number; bytesPerRow: number }> = [];

async function phase(label: string, ports: number[], redisEnv: Record<string, string>): Promise<void> {
  const b = benchConfig(sim);
  Object.assign(b.env, redisEnv);
  for (const [k, v] of Object.entries(redisEnv)) process.env[k] = v;
  const raw = fleetWorkspaces(sim, names, limit);
  writeFileSync(b.configPath, JSON.stringify(raw));
  const config = configFromObject(raw, { source: b.configPath, env: b.env });
  const runtime = await openRuntime(config, silentLogger);
  const workers: ChildProcess[] = [spawnWorkerProcess(b, 8), spawnWorkerProcess(b, 8)];
  while ((await runtime.redis.hlen(poolsKey(b.prefix))) < 2) await sleep(50);
  await sleep(2000);
  const counters = async (metric: string) =>
    (await readCounters(runtime.redis, b.prefix)).filter((c) => c.metric === metric).reduce((n, c) => n + c.value, 0);
  const [requests0, limited0] = [await counters(METRIC.requests), await counters(METRIC.rateLimited)];
  const before = await masterStats(ports);
  const started = Date.now();
  const runs = await Promise.all(names.slice(0, ACTIVE).map((ws) => queueRows(runtime, b, sim, ws, ROWS)));
  const done = await waitAll(
    runtime,
    runs.map((r) => r.id),
  );
  const elapsed = (Date.now() - started) / 1000;
  await sleep(1500); // the workers flush their counters every second
  const after = await masterStats(ports);
  const requests = (await counters(METRIC.requests)) - requests0;
  const limited = (await counters(METRIC.rateLimited)) - limited0;
  const succeeded = done.reduce((n, r) => n + r.counts.succeeded, 0);
  const rates = ports.map((p) => (after.get(p)!.commands - before.get(p)!.commands) / elapsed);
  const commands = ports.reduce((n, p) => n + after.get(p)!.commands - before.get(p)!.commands, 0);
  const bytes = ports.reduce((n, p) => n + after.get(p)!.memory - before.get(p)!.memory, 0);
  const cores = ports.map((p) => (after.get(p)!.cpu - before.get(p)!.cpu) / elapsed);
  perRow.push({
    label,
    commandsPerRequest: commands / Math.max(1, requests),
    bytesPerRow: bytes / Math.max(1, succeeded),
  });
  console.log(
    `${label}: ${succeeded}/${ACTIVE * ROWS} succeeded in ${fmt(elapsed)} s, ${fmt(requests / elapsed)} requests/s ` +
      `(${fmt(requests / elapsed / (RATE * ACTIVE), 2)} of the ${RATE * ACTIVE} ideal), 429s ${limited}; ` +
      `${fmt(commands / Math.max(1, requests), 1)} Redis commands per request; ` +
      `commands/s by master ${rates.map((r) => fmt(r, 0)).join(' / ')}${ports.length > 1 ? ` (max/min ${fmt(Math.max(...rates) / Math.min(...rates), 2)})` : ''}, ` +
      `CPU by master ${cores.map((c) => fmt(c, 2)).join(' / ')} cores; ` +
      `memory gained ${fmt(bytes / Math.max(1, succeeded), 0)} B per row (results, jobs kept, indexes); ` +
      `keys by master ${ports.map((p) => after.get(p)!.keys).join(' / ')}`,
  );
  await stopProcesses(workers);
  await runtime.close();
  removeBenchDir(b);
  for (const k of Object.keys(redisEnv)) delete process.env[k];
}

// --- one Redis ------------------------------------------------------------------------------
const single = await startPrivateRedis();
await phase('one Redis', [Number(new URL(single.url).port)], { REDIS_URL: single.url });
await single.stop();
delete process.env.REDIS_URL;

// --- 3 masters ------------------------------------------------------------------------------
const cluster = await startLocalRedisCluster({ masters: 3, replicas: 0 });
await phase(
  'Redis Cluster, 3 masters',
  (await cluster.masters()).map((m) => m.port),
  { REDIS_CLUSTER_NODES: cluster.nodes },
);
await cluster.close();
await sim.stop();

// --- sizing -----------------------------------------------------------------------------------
const measured = perRow[perRow.length - 1]!;
console.log(
  `sizing (from the cluster phase: ${fmt(measured.commandsPerRequest, 1)} commands and ${fmt(measured.bytesPerRow, 0)} B gained per row):`,
);
for (const rowsPerDay of [1e6, 10e6, 150e6]) {
  const perSecond = (rowsPerDay / 86_400) * measured.commandsPerRequest;
  console.log(
    `  ${fmt(rowsPerDay / 1e6, 0)}M rows/day: ${fmt(perSecond, 0)} commands/s averaged over the day; ` +
      `results kept 30 days ≈ ${fmt((rowsPerDay * 30 * 77) / 1e9, 1)} GB at 77 B a row (RESULTS.md, "1,000,000-row import")`,
  );
}
