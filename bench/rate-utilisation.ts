/**
 * Rate utilisation: the simulator allows LIMIT requests/s (a token bucket); 1, 2 and 4 worker
 * processes share the workspace's budget through Redis. Prints achieved rows/s as a share of
 * the limit, the 429 ratio, and Redis commands per CRM request (INFO deltas of a Redis server
 * started for the benchmark alone, so other work on the machine is not counted). With
 * BENCH_COMMANDS=1 it also counts the commands clients send (through MONITOR, which slows
 * everything: read the rates from a run without it) and prints the ten most frequent.
 *
 *   npx tsx bench/rate-utilisation.ts [limit=50] [processes=1,2,4] [mode=known|adaptive] [seconds=30]
 *
 * `known`: the config holds the limit. `adaptive`: it does not, and the workers must find it;
 * then the 429 ratio is also given after the first 10 s (from the workers' counters).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisClient } from '../src/redis/index.js';
import { silentLogger } from '../src/log/index.js';
import { readCounters, METRIC } from '../src/metrics/index.js';
import { workerCount } from '../src/queue/index.js';
import { openRuntime } from '../src/runtime/index.js';
import {
  benchConfig,
  dropPrefix,
  countSentCommands,
  importAndWait,
  redisCommandCounts,
  removeBenchDir,
  fmt,
  spawnWorkerProcess,
  startPrivateRedis,
  startSimProcess,
  stopProcesses,
} from './bench-lib.js';
import { dealIds } from './ids.js';
import { busiestWindow, startRequestCounter } from './request-counter.js';

const LIMIT = Number(process.argv[2] ?? 50);
const PROCESSES = (process.argv[3] ?? '1,2,4').split(',').map(Number);
const MODE = process.argv[4] === 'adaptive' ? 'adaptive' : 'known';
const SECONDS = Number(process.argv[5] ?? 30);
const ROWS = LIMIT * SECONDS;

const redisServer = await startPrivateRedis();
const sim = await startSimProcess({ records: Math.min(ROWS, 20_000), rate: `${LIMIT}/s` });
const allIds = await dealIds(sim);
// Every request as the CRM's front door counts it, list pages (before-values) included: the
// workers' counters count row requests only.
const front = await startRequestCounter(sim.port);
const viaCounter = { ...sim, baseUrl: front.baseUrlOf('acme') };
const ids = Array.from({ length: ROWS }, (_, i) => allIds[i % allIds.length]!);
console.log(
  `rate utilisation (${MODE} limit): ${ROWS} deal updates, simulator limit ${LIMIT} req/s, worker concurrency 8 per process`,
);

async function counter(redis: RedisClient, prefix: string, metric: string): Promise<number> {
  return (await readCounters(redis, prefix)).filter((c) => c.metric === metric).reduce((n, c) => n + c.value, 0);
}

for (const processes of PROCESSES) {
  await sleep(Math.ceil(2000 + 1000)); // the simulator's bucket refills (a second's worth) between rounds
  const b = benchConfig(viaCounter, MODE === 'known' ? { max: LIMIT, durationMs: 1000 } : undefined);
  const file = join(b.dir, 'deals.csv');
  writeFileSync(file, `id,name\n${ids.map((id, i) => `${id},Bench ${processes}-${i}`).join('\n')}\n`);
  const runtime = await openRuntime(b.config, silentLogger);
  const workers = Array.from({ length: processes }, () => spawnWorkerProcess(b, 8));
  // Every worker process connected (they start slowly on a busy machine), then a moment more.
  for (let i = 0; i < 300 && (await workerCount(runtime.redis, b.prefix, 'acme')) < processes; i++) await sleep(100);
  await sleep(500);
  const before = await redisCommandCounts();
  // MONITOR costs Redis and this process a lot: only when asked, and then the rates are not the point.
  const monitor = process.env.BENCH_COMMANDS ? await countSentCommands() : undefined;
  // The 429 ratio after the first 10 s: counters sampled at 10 s (they are flushed every second).
  let at10: { requests: number; limited: number } | undefined;
  const sampler = setTimeout(() => {
    void Promise.all([
      counter(runtime.redis, b.prefix, METRIC.requests),
      counter(runtime.redis, b.prefix, METRIC.rateLimited),
    ]).then(([requests, limited]) => {
      at10 = { requests, limited };
    });
  }, 10_500);
  const from = (await front.arrivals()).length;
  const { run: final, startedAt: started } = await importAndWait(runtime, file, 200);
  clearTimeout(sampler);
  const seconds = (Date.parse(final.finishedAt ?? new Date().toISOString()) - started) / 1000;
  const after = await redisCommandCounts();
  const sent = monitor?.sent();
  await monitor?.stop();
  await sleep(1200); // workers flush their counters every second
  const requests = await counter(runtime.redis, b.prefix, METRIC.requests);
  const limited = await counter(runtime.redis, b.prefix, METRIC.rateLimited);
  const rate = final.counts.succeeded / seconds;
  const arrivals = await front.arrivals(from);
  const reads = arrivals.filter((a) => a.method === 'GET').length;
  const crmRate = arrivals.filter((a) => a.status !== 429).length / seconds;
  const late =
    at10 === undefined
      ? ''
      : `, after 10 s ${limited - at10.limited}/${requests - at10.requests} (${fmt(((limited - at10.limited) / Math.max(1, requests - at10.requests)) * 100, 2)}%)`;
  // Past the start (workers warming up, the rate being found): successful requests/s after 10.5 s.
  const steady =
    at10 === undefined ? undefined : (requests - limited - (at10.requests - at10.limited)) / (seconds - 10.5);
  console.log(
    `${processes} worker process${processes > 1 ? 'es' : ''}: ${final.counts.succeeded}/${ROWS} succeeded in ${fmt(seconds)} s = ${fmt(rate)} rows/s ` +
      `(${fmt((rate / LIMIT) * 100)}% of the limit${steady === undefined ? '' : `; after 10 s ${fmt((steady / LIMIT) * 100)}%`}); requests ${requests}, 429s ${limited} (${fmt((limited / Math.max(1, requests)) * 100, 2)}%${late}); ` +
      `at the CRM ${arrivals.length} requests (${reads} list pages) = ${fmt((crmRate / LIMIT) * 100)}% of the limit, busiest 1 s ${busiestWindow(
        arrivals.map((a) => a.at),
        1000,
      )}; ` +
      `Redis commands per request: ${sent === undefined ? '' : `${fmt(sent / Math.max(1, requests))} sent, `}${fmt((after.scripts - before.scripts) / Math.max(1, requests))} Lua script calls, ` +
      `${fmt((after.all - before.all) / Math.max(1, requests))} counting those the scripts run`,
  );
  // Where a whole run's share goes short of its steady one: the wait before the CRM's first
  // request, the list pages (before-values) and the tail after its last.
  if (arrivals.length > 0) {
    const ended = Date.parse(final.finishedAt ?? new Date().toISOString());
    const writes = arrivals.filter((a) => a.method !== 'GET');
    console.log(
      `  first request ${fmt(arrivals[0]!.at - started, 0)} ms after the import began (first write ${fmt((writes[0]?.at ?? NaN) - started, 0)} ms), ` +
        `run ended ${fmt(ended - arrivals.at(-1)!.at, 0)} ms after the last; list pages ${reads} = ${fmt((reads / LIMIT) * 1000, 0)} ms of the budget`,
    );
  }
  if (process.env.BENCH_COMMANDS) {
    // Which commands (BENCH_COMMANDS=1): the top ten per request.
    const per = [...after.byCommand].map(
      ([cmd, n]) => [cmd, (n - (before.byCommand.get(cmd) ?? 0)) / Math.max(1, requests)] as const,
    );
    console.log(
      '  per request: ' +
        per
          .sort((a, b) => b[1] - a[1])
          .slice(0, 10)
          .map(([cmd, n]) => `${cmd} ${fmt(n, 2)}`)
          .join(', '),
    );
  }
  await stopProcesses(workers);
  await runtime.close();
  await dropPrefix(b.prefix);
  removeBenchDir(b);
}
await front.close();
await sim.stop();
await redisServer.stop();
