/**
 * The rate budget as a metering CRM sees it (issue 31, item 13). A loopback proxy in front of the
 * simulator (bench/request-counter.ts) notes when every request arrives and how it was answered.
 *
 *   npx tsx bench/rate-window.ts [limit=50] [processes=1,4] [seconds=20]
 *
 * 1. Known limit (`rateLimit` LIMIT per 1000 ms in the config): the busiest 1000 ms window of
 *    arrivals, over the whole run and over its first two seconds (no window may hold more than
 *    LIMIT: a CRM that counts a sliding window would answer the rest 429), the share of the
 *    limit and the 429s.
 * 2. Cold start (no limit in the config, a workspace never seen): how long from the first
 *    request until the successes of the last second reach 0.95 of the limit, the share of the
 *    limit after 5 s, and the 429s.
 * 3. The same workspace again with new worker processes (a restart): it starts at the rate it
 *    learned — the successes of its first second, and the time to 0.95.
 *
 * The simulator meters with a token bucket of one second's capacity (it starts full).
 * BENCH_KNOWN_ONLY=1 runs part 1 alone, BENCH_COLD_ONLY=1 parts 2 and 3; BENCH_DUMP=<path>
 * writes part 1's arrival times.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { silentLogger } from '../src/log/index.js';
import { workerCount } from '../src/queue/index.js';
import { openRuntime } from '../src/runtime/index.js';
import {
  benchConfig,
  dropPrefix,
  fmt,
  importAndWait,
  removeBenchDir,
  spawnWorkerProcess,
  startPrivateRedis,
  startSimProcess,
  stopProcesses,
  type BenchEnv,
} from './bench-lib.js';
import { dealIds } from './ids.js';
import { busiestWindow, startRequestCounter, timeToRate, type Arrival } from './request-counter.js';

const LIMIT = Number(process.argv[2] ?? 50);
const PROCESSES = (process.argv[3] ?? '1,4').split(',').map(Number);
const SECONDS = Number(process.argv[4] ?? 20);
const ROWS = LIMIT * SECONDS;

const redisServer = await startPrivateRedis();
const sim = await startSimProcess({ records: Math.min(ROWS, 20_000), rate: `${LIMIT}/s` });
const counter = await startRequestCounter(sim.port);
const allIds = await dealIds(sim);
const ids = Array.from({ length: ROWS }, (_, i) => allIds[i % allIds.length]!);
const viaProxy = { ...sim, baseUrl: counter.baseUrlOf('acme') };
console.log(
  `rate window: ${ROWS} deal updates a run, simulator limit ${LIMIT} req/s (token bucket, 1 s capacity), ` +
    `worker concurrency 8 per process, every request counted at a loopback proxy`,
);

interface Round {
  arrivals: Arrival[];
  start: number;
  end: number;
  succeeded: number;
}

/** One import through `processes` fresh worker processes; the arrivals it caused. */
async function round(b: BenchEnv, processes: number, tag: string): Promise<Round> {
  await sleep(2000); // the simulator's bucket refills between rounds
  const file = join(b.dir, `deals-${tag}.csv`);
  writeFileSync(file, `id,name\n${ids.map((id, i) => `${id},Bench ${tag}-${i}`).join('\n')}\n`);
  const runtime = await openRuntime(b.config, silentLogger);
  const workers = Array.from({ length: processes }, () => spawnWorkerProcess(b, 8));
  for (let i = 0; i < 300 && (await workerCount(runtime.redis, b.prefix, 'acme')) < processes; i++) await sleep(100);
  await sleep(500);
  const from = (await counter.arrivals()).length;
  const { run } = await importAndWait(runtime, file, 100);
  const arrivals = await counter.arrivals(from);
  await stopProcesses(workers);
  await runtime.close();
  const times = arrivals.map((a) => a.at);
  return { arrivals, start: Math.min(...times), end: Math.max(...times), succeeded: run.counts.succeeded };
}

function limited(r: Round): string {
  const n = r.arrivals.filter((a) => a.status === 429).length;
  return `${n}/${r.arrivals.length} (${fmt((n / Math.max(1, r.arrivals.length)) * 100, 2)}%)`;
}

const okAfter = (r: Round, ms: number) =>
  r.arrivals.filter((a) => a.status >= 200 && a.status < 300 && a.at - r.start >= ms).length;

console.log('\n1. known limit');
for (const processes of process.env.BENCH_COLD_ONLY ? [] : PROCESSES) {
  const b = benchConfig(viaProxy, { max: LIMIT, durationMs: 1000 });
  const r = await round(b, processes, `known-${processes}`);
  const times = r.arrivals.map((a) => a.at);
  const first2 = times.filter((t) => t - r.start < 2000);
  if (process.env.BENCH_DUMP)
    writeFileSync(`${process.env.BENCH_DUMP}-${processes}.json`, JSON.stringify(times.map((t) => t - r.start)));
  const seconds = (r.end - r.start) / 1000;
  console.log(
    `  ${processes} process(es): busiest 1000 ms window ${busiestWindow(times, 1000)} requests (limit ${LIMIT}), ` +
      `in the first 2 s ${busiestWindow(first2, 1000)}; ${r.succeeded}/${ROWS} succeeded over ${fmt(seconds)} s = ` +
      `${fmt((r.succeeded / seconds / LIMIT) * 100)}% of the limit; 429s ${limited(r)}`,
  );
  await dropPrefix(b.prefix);
  removeBenchDir(b);
}

if (process.env.BENCH_KNOWN_ONLY) process.exit(0);
console.log('\n2. cold start (limit unknown, a new workspace), then 3. the same workspace after a restart');
for (const processes of PROCESSES) {
  const b = benchConfig(viaProxy);
  for (const [label, tag] of [
    ['cold', `cold-${processes}`],
    ['restarted', `warm-${processes}`],
  ] as const) {
    const r = await round(b, processes, tag);
    const reach = timeToRate(r.arrivals, r.start, Math.ceil(LIMIT * 0.95));
    const seconds = (r.end - r.start) / 1000;
    const firstSecond = r.arrivals.filter((a) => a.status < 300 && a.at - r.start < 1000).length;
    console.log(
      `  ${processes} process(es), ${label}: 0.95 of the limit reached ${reach === undefined ? 'never' : `after ${fmt(reach / 1000, 2)} s`}; ` +
        `first second ${firstSecond} ok; share of the limit ${fmt((r.succeeded / seconds / LIMIT) * 100)}% over the run, ` +
        `${fmt((okAfter(r, 5000) / Math.max(0.001, seconds - 5) / LIMIT) * 100)}% after 5 s; 429s ${limited(r)}; ` +
        `busiest 1000 ms window ${busiestWindow(
          r.arrivals.map((a) => a.at),
          1000,
        )}`,
    );
  }
  await dropPrefix(b.prefix);
  removeBenchDir(b);
}

await counter.close();
await sim.stop();
await redisServer.stop();
