/**
 * Thousands of workspaces on a small fleet (issue 15, item 3): WORKSPACES configured workspaces
 * (the simulator serves them all, 10 req/s each, a known limit in the config), 2 worker
 * processes serving every configured workspace, a Redis server of the benchmark's own.
 *
 *   npx tsx bench/workspace-fleet.ts [workspaces=1000] [active=200] [seconds=15]
 *
 * Prints: worker start-up (spawn → its pool announced), Redis connections and commands/s while
 * idle, how long a workspace added to the config file takes to be served (no restart), then
 * ACTIVE workspaces × 10 req/s × SECONDS of deal updates queued at once: requests/s against the
 * 10 × ACTIVE ideal, the spread of the runs' durations, peak connections, 429s, Redis commands
 * per request and CPU by process. Last, the machine's ceiling for the same shape: the same
 * workspaces and rows against a simulator without a limit, with fresh worker processes.
 * Deal ids are listed before each measured phase (listing spends the simulator's limit too).
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { configFromObject, type Config } from '../src/config/index.js';
import { poolsKey } from '../src/keys/index.js';
import { silentLogger } from '../src/log/index.js';
import { METRIC, readCounters } from '../src/metrics/index.js';
import { openRuntime, type Runtime } from '../src/runtime/index.js';
import {
  benchConfig,
  cpuMeter,
  fmt,
  peakRssMb,
  redisCommandCounts,
  redisPid,
  removeBenchDir,
  spawnWorkerProcess,
  startPrivateRedis,
  startSimProcess,
  stopProcesses,
  type BenchEnv,
  type SimProcess,
} from './bench-lib.js';
import { fleetWorkspaces, prefetchIds, queueRows, waitAll, workspaceNames } from './fleet-lib.js';

const WORKSPACES = Number(process.argv[2] ?? 1000);
const ACTIVE = Math.min(WORKSPACES, Number(process.argv[3] ?? 200));
const SECONDS = Number(process.argv[4] ?? 15);
const RATE = 10;
const ROWS = RATE * SECONDS;
const names = workspaceNames(WORKSPACES);

const redisServer = await startPrivateRedis();
const sim = await startSimProcess({ records: ROWS, rate: `${RATE}/s`, workspaces: [...names, 'late'] });
const b = benchConfig(sim);
const limit = { max: RATE, durationMs: 1000 };
const rawConfig = (list: string[]) => fleetWorkspaces(sim, list, limit);
writeFileSync(b.configPath, JSON.stringify(rawConfig(names)));
const config: Config = configFromObject(rawConfig([...names, 'late']), { source: b.configPath, env: b.env });
const redis = new Redis(redisServer.url);
console.log(
  `workspace fleet: ${WORKSPACES} workspaces configured, 2 worker processes (concurrency 8), simulator ${RATE} req/s per workspace`,
);

// --- start-up -------------------------------------------------------------------------------
const spawnedAt = Date.now();
const workers = [spawnWorkerProcess(b, 8), spawnWorkerProcess(b, 8)];
while ((await redis.hlen(poolsKey(b.prefix))) < 2) await sleep(20);
console.log(
  `start-up: both pools announced ${fmt((Date.now() - spawnedAt) / 1000, 2)} s after spawn (Node start included)`,
);

// --- idle -----------------------------------------------------------------------------------
async function clients(): Promise<number> {
  return Number(/connected_clients:(\d+)/.exec(await redis.info('clients'))?.[1] ?? 0) - 1;
}
await sleep(5000);
const idleBefore = await redisCommandCounts(redisServer.url);
const idleSeconds = 30;
await sleep(idleSeconds * 1000);
const idleAfter = await redisCommandCounts(redisServer.url);
// The two INFO calls themselves are in the delta; they are not the workers'.
const idleRate = (idleAfter.all - idleBefore.all - 1) / idleSeconds;
const top = [...idleAfter.byCommand]
  .map(([c, n]) => [c, n - (idleBefore.byCommand.get(c) ?? 0)] as const)
  .filter(([, n]) => n > 0)
  .sort((x, y) => y[1] - x[1])
  .slice(0, 5)
  .map(([c, n]) => `${c} ${n}`)
  .join(', ');
console.log(
  `idle: ${await clients()} Redis connections (workers), ${fmt(idleRate, 2)} commands/s over ${idleSeconds} s (${top})`,
);

// --- a workspace added to the config, no restart ----------------------------------------------
const runtime = await openRuntime(config, silentLogger);
const file = JSON.parse(readFileSync(b.configPath, 'utf8')) as ReturnType<typeof rawConfig>;
writeFileSync(b.configPath, JSON.stringify(rawConfig([...Object.keys(file.workspaces), 'late'])));
const addedAt = Date.now();
const [late] = await waitAll(runtime, [(await queueRows(runtime, b, sim, 'late', 5)).id]);
console.log(
  `config reload: workspace "late" added to the file; its 5-row run ${late!.status} ${fmt((Date.now() - addedAt) / 1000, 2)} s later, no restart`,
);

// --- ACTIVE workspaces at 10 req/s each ---------------------------------------------------------
await prefetchIds(sim, names.slice(0, ACTIVE));
await measureActive(`active, ${RATE} req/s each`, runtime, b, sim, workers, RATE * ACTIVE);
await runtime.close();

// --- the machine's ceiling: the same workspaces and rows, no limit -------------------------------
// A second simulator without a limit, a config whose known limit is far above what the box can
// send (the same code path), and fresh worker processes.
const open = await startSimProcess({ records: ROWS, workspaces: names.slice(0, ACTIVE) });
const b2 = benchConfig(open);
const rawOpen = fleetWorkspaces(open, names.slice(0, ACTIVE), { max: 1000, durationMs: 1000 });
writeFileSync(b2.configPath, JSON.stringify(rawOpen));
const workers2 = [spawnWorkerProcess(b2, 8), spawnWorkerProcess(b2, 8)];
while ((await redis.hlen(poolsKey(b2.prefix))) < 2) await sleep(20);
const runtime2 = await openRuntime(configFromObject(rawOpen, { source: b2.configPath, env: b2.env }), silentLogger);
await prefetchIds(open, names.slice(0, ACTIVE));
await measureActive('ceiling, no limit', runtime2, b2, open, workers2);
await runtime2.close();
await stopProcesses(workers2);
await open.stop();
removeBenchDir(b2);

redis.disconnect();
await stopProcesses(workers);
await sim.stop();
await redisServer.stop();
removeBenchDir(b);

/** ACTIVE workspaces × ROWS deal updates queued at once; prints the figures of the phase. */
async function measureActive(
  label: string,
  rt: Runtime,
  env: BenchEnv,
  simp: SimProcess,
  procs: ChildProcess[],
  ideal?: number,
): Promise<void> {
  const before = await redisCommandCounts(redisServer.url);
  const counters = async (metric: string) =>
    (await readCounters(rt.redis, env.prefix)).filter((c) => c.metric === metric).reduce((n, c) => n + c.value, 0);
  const [requests0, limited0] = [await counters(METRIC.requests), await counters(METRIC.rateLimited)];
  let peakClients = 0;
  const sampler = setInterval(() => void clients().then((n) => (peakClients = Math.max(peakClients, n))), 500);
  const cpu = cpuMeter({
    workers: procs[0]!.pid,
    workers2: procs[1]!.pid,
    sim: simp.child.pid,
    redis: await redisPid(redisServer.url),
    bench: process.pid,
  });
  const started = Date.now();
  const runs = await Promise.all(names.slice(0, ACTIVE).map((ws) => queueRows(rt, env, simp, ws, ROWS)));
  const queuedIn = (Date.now() - started) / 1000;
  const done = await waitAll(
    rt,
    runs.map((r) => r.id),
  );
  const elapsed = (Date.now() - started) / 1000;
  const used = cpu();
  clearInterval(sampler);
  const after = await redisCommandCounts(redisServer.url);
  const requests = (await counters(METRIC.requests)) - requests0;
  const limited = (await counters(METRIC.rateLimited)) - limited0;
  const durations = done.map((r) => (Date.parse(r.finishedAt ?? '') - Date.parse(r.createdAt)) / 1000);
  const succeeded = done.reduce((n, r) => n + r.counts.succeeded, 0);
  const top = [...after.byCommand]
    .map(([c, n]) => [c, n - (before.byCommand.get(c) ?? 0)] as const)
    .sort((x, y) => y[1] - x[1])
    .slice(0, 6)
    .map(([c, n]) => `${c} ${fmt(n / Math.max(1, requests), 2)}`)
    .join(', ');
  const cores = Object.values(used).reduce((a, n) => a + n, 0) / elapsed;
  console.log(
    `${label}: ${ACTIVE} workspaces × ${ROWS} rows (queued in ${fmt(queuedIn)} s): ${succeeded}/${ACTIVE * ROWS} succeeded in ${fmt(elapsed)} s; ` +
      `${fmt(requests / elapsed)} requests/s${ideal ? ` = ${fmt(requests / elapsed / ideal, 2)} of the ${ideal} req/s ideal` : ''}; ` +
      `run durations ${fmt(Math.min(...durations))}–${fmt(Math.max(...durations))} s (max/min ${fmt(Math.max(...durations) / Math.min(...durations), 2)}); ` +
      `429s ${limited}; peak ${peakClients} Redis connections; ${fmt((after.all - before.all) / Math.max(1, requests), 1)} Redis commands per request (${top}); ` +
      `CPU ${fmt(cores, 2)} cores (${Object.entries(used)
        .map(([k, v]) => `${k} ${fmt(v / elapsed, 2)}`)
        .join(', ')}); ` +
      `worker RSS ${procs.map((w) => fmt(peakRssMb(w.pid!), 0)).join(' / ')} MB`,
  );
}
