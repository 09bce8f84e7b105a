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
 * 10 × ACTIVE ideal, the spread of the runs' durations, peak connections and 429s.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { configFromObject, type Config } from '../src/config/index.js';
import { silentLogger } from '../src/log/index.js';
import { METRIC, readCounters } from '../src/metrics/index.js';
import { importFile, poolsKey } from '../src/queue/index.js';
import { openRuntime } from '../src/runtime/index.js';
import {
  benchConfig,
  fmt,
  peakRssMb,
  redisCommandCounts,
  removeBenchDir,
  spawnWorkerProcess,
  startPrivateRedis,
  startSimProcess,
  stopProcesses,
} from './bench-lib.js';
import { dealIds } from './ids.js';

const WORKSPACES = Number(process.argv[2] ?? 1000);
const ACTIVE = Math.min(WORKSPACES, Number(process.argv[3] ?? 200));
const SECONDS = Number(process.argv[4] ?? 15);
const RATE = 10;
const ROWS = RATE * SECONDS;
const names = Array.from({ length: WORKSPACES }, (_, i) => `w${String(i).padStart(4, '0')}`);

const redisServer = await startPrivateRedis();
const sim = await startSimProcess({ records: ROWS, rate: `${RATE}/s`, workspaces: [...names, 'late'] });
const b = benchConfig(sim);
const limit = { max: RATE, durationMs: 1000 };
const rawConfig = (list: string[]) => ({
  workspaces: Object.fromEntries(
    list.map((n) => [n, { baseUrl: sim.baseUrlOf(n), apiKeyEnv: 'BENCH_KEY', rateLimit: limit }]),
  ),
});
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
const clients = async () => Number(/connected_clients:(\d+)/.exec(await redis.info('clients'))?.[1] ?? 0) - 1;
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
async function queue(ws: string, rows: number) {
  const ids = await dealIds(sim, ws);
  const file = join(b.dir, `${ws}.csv`);
  writeFileSync(
    file,
    `id,name\n${ids
      .slice(0, rows)
      .map((id, i) => `${id},Fleet ${i}`)
      .join('\n')}\n`,
  );
  return (
    await importFile({
      file,
      op: 'deal.update',
      workspace: ws,
      queue: runtime.queue(ws),
      store: runtime.store,
      rowsPerJob: 10,
    })
  ).run;
}
async function waitAll(ids: string[]) {
  for (;;) {
    const runs = await Promise.all(ids.map((id) => runtime.store.requireRun(id)));
    if (runs.every((r) => r.status !== 'running')) return runs;
    await sleep(200);
  }
}
const file = JSON.parse(readFileSync(b.configPath, 'utf8')) as ReturnType<typeof rawConfig>;
writeFileSync(b.configPath, JSON.stringify(rawConfig([...Object.keys(file.workspaces), 'late'])));
const addedAt = Date.now();
const [late] = await waitAll([(await queue('late', 5)).id]);
console.log(
  `config reload: workspace "late" added to the file; its 5-row run ${late!.status} ${fmt((Date.now() - addedAt) / 1000, 2)} s later, no restart`,
);

// --- ACTIVE workspaces at 10 req/s each ---------------------------------------------------------
await sleep(2000); // the simulator's buckets are full again
const before = await redisCommandCounts(redisServer.url);
const counters = async (metric: string) =>
  (await readCounters(runtime.redis, b.prefix)).filter((c) => c.metric === metric).reduce((n, c) => n + c.value, 0);
const [requests0, limited0] = [await counters(METRIC.requests), await counters(METRIC.rateLimited)];
let peakClients = 0;
const sampler = setInterval(() => void clients().then((n) => (peakClients = Math.max(peakClients, n))), 500);
const started = Date.now();
const runs = await Promise.all(names.slice(0, ACTIVE).map((ws) => queue(ws, ROWS)));
const queuedIn = (Date.now() - started) / 1000;
const done = await waitAll(runs.map((r) => r.id));
const elapsed = (Date.now() - started) / 1000;
clearInterval(sampler);
const after = await redisCommandCounts(redisServer.url);
const requests = (await counters(METRIC.requests)) - requests0;
const limited = (await counters(METRIC.rateLimited)) - limited0;
const durations = done.map((r) => (Date.parse(r.finishedAt ?? '') - Date.parse(r.createdAt)) / 1000);
const succeeded = done.reduce((n, r) => n + r.counts.succeeded, 0);
const ideal = RATE * ACTIVE;
console.log(
  `active: ${ACTIVE} workspaces × ${ROWS} rows (all queued in ${fmt(queuedIn)} s): ${succeeded}/${ACTIVE * ROWS} succeeded in ${fmt(elapsed)} s; ` +
    `${fmt(requests / elapsed)} requests/s = ${fmt(requests / elapsed / ideal, 2)} of the ${ideal} req/s ideal; ` +
    `run durations ${fmt(Math.min(...durations))}–${fmt(Math.max(...durations))} s (max/min ${fmt(Math.max(...durations) / Math.min(...durations), 2)}); ` +
    `429s ${limited}; peak ${peakClients} Redis connections; ${fmt((after.all - before.all) / Math.max(1, requests), 1)} Redis commands per request; ` +
    `worker RSS ${workers.map((w) => fmt(peakRssMb(w.pid!), 0)).join(' / ')} MB`,
);

await runtime.close();
redis.disconnect();
await stopProcesses(workers);
await sim.stop();
await redisServer.stop();
removeBenchDir(b);
