/**
 * Redis a network hop away (issue 42, item 2). One and two worker processes reach their Redis
 * through a TCP proxy that delays every byte DELAY ms each way (test/helpers/tcp-proxy.ts, in a
 * process of its own, bench/delay-proxy.ts, so the benchmark's own work cannot hold its timers up); the producer and
 * this process reach it directly. The simulator allows LIMIT requests/s (a token bucket of one
 * second), and a loopback HTTP proxy in front of it notes every request's arrival and answer
 * (bench/request-counter.ts): what a metering CRM would count.
 *
 *   npx tsx bench/redis-latency.ts [delays=0,1,5,20,50,100] [processes=1,2] [modes=known,learned] [seconds=20] [concurrency=8]
 *
 * `concurrency` is per worker process: a number, or `delay:n,…` pairs (e.g. `50:24,100:48`) with
 * 8 for a delay not named. For each delay, processes and mode: the share of the limit the
 * successful requests reach from 5 s after the first request to the last, the 429s, the busiest
 * 1000 ms window of arrivals (a known limit allows no window over LIMIT), and the run's time.
 * `known`: the config holds the limit; `learned`: it does not (a workspace never seen, cold).
 * BENCH_BUSY=N runs N busy-loop processes beside the workers (a loaded machine). BENCH_TRACE=1
 * adds a line a run: when its 429s came and the successful requests of each second.
 * BENCH_OP=create sends deal creates instead of updates (one a job, a fence call before each POST).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
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
} from './bench-lib.js';
import { dealIds } from './ids.js';
import { busiestWindow, startRequestCounter, tightestSpan, type Arrival } from './request-counter.js';

await main();

/** The delay proxy in a child process; resolves with its port. */
async function startDelayProxy(upstreamPort: number, delayMs: number): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', new URL('./delay-proxy.ts', import.meta.url).pathname, String(upstreamPort), String(delayMs)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const kill = () => child.kill('SIGKILL');
  // One listener a proxy, gone with it: a benchmark of six delays would pass Node's ten.
  process.on('exit', kill);
  child.once('exit', () => process.off('exit', kill));
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`delay proxy exited ${code}`)));
    child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
  });
  return { port, child };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
}

/** Share of the limit the 2xx arrivals reach from `skipMs` after the first request to the last. */
function shareAfter(arrivals: readonly Arrival[], limit: number, skipMs: number): number | undefined {
  if (arrivals.length === 0) return undefined;
  const times = arrivals.map((a) => a.at).sort((a, b) => a - b);
  const from = times[0]! + skipMs;
  const to = times.at(-1)!;
  if (to - from < 1000) return undefined;
  const ok = arrivals.filter((a) => a.status >= 200 && a.status < 300 && a.at >= from).length;
  return ok / (((to - from) / 1000) * limit);
}

async function main(): Promise<void> {
  const DELAYS = (process.argv[2] ?? '0,1,5,20,50,100').split(',').map(Number);
  const PROCESSES = (process.argv[3] ?? '1,2').split(',').map(Number);
  const MODES = (process.argv[4] ?? 'known,learned').split(',') as Array<'known' | 'learned'>;
  const SECONDS = Number(process.argv[5] ?? 20);
  const concArg = process.argv[6] ?? '8';
  const concurrencyAt = (delay: number): number => {
    if (/^\d+$/.test(concArg)) return Number(concArg);
    const pairs = new Map(concArg.split(',').map((p) => p.split(':').map(Number) as [number, number]));
    return pairs.get(delay) ?? 8;
  };
  const LIMIT = 50;
  const ROWS = LIMIT * SECONDS;
  const BUSY = Number(process.env.BENCH_BUSY ?? 0);
  const CREATES = process.env.BENCH_OP === 'create';

  const redisServer = await startPrivateRedis();
  const redisPort = Number(new URL(redisServer.url).port);
  const sim = await startSimProcess({ records: Math.min(ROWS, 20_000), rate: `${LIMIT}/s` });
  const counter = await startRequestCounter(sim.port);
  const allIds = await dealIds(sim);
  const ids = Array.from({ length: ROWS }, (_, i) => allIds[i % allIds.length]!);
  const viaCounter = { ...sim, baseUrl: counter.baseUrlOf('acme') };
  const busy = Array.from({ length: BUSY }, () => spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
  process.on('exit', () => busy.forEach((c) => c.kill('SIGKILL')));
  console.log(
    `redis latency: ${ROWS} deal ${CREATES ? 'creates' : 'updates'} a run, simulator limit ${LIMIT} req/s (token bucket, 1 s), ` +
      `workers reach Redis through a delay proxy; ${BUSY} busy-loop processes beside them; request counter at ${counter.priority} priority; load ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  console.log(
    '| delay each way | mode | processes × concurrency | share of 50/s after 5 s | 429s | busiest 1 s (51 arrivals within) | time | load (1 min) |',
  );
  console.log('|---|---|---|---|---|---|---|---|');

  for (const delay of DELAYS) {
    const proxy = await startDelayProxy(redisPort, delay);
    for (const mode of MODES)
      for (const processes of PROCESSES) {
        await sleep(2000); // the simulator's bucket refills between rounds
        const concurrency = concurrencyAt(delay);
        const b = benchConfig(viaCounter, mode === 'known' ? { max: LIMIT, durationMs: 1000 } : undefined);
        const file = join(b.dir, 'deals.csv');
        const name = (i: number) => `Lat ${delay}-${processes}-${i}`;
        const rows = CREATES ? ids.map((_, i) => `${name(i)},${i}`) : ids.map((id, i) => `${id},${name(i)}`);
        writeFileSync(file, `${CREATES ? 'name,value' : 'id,name'}\n${rows.join('\n')}\n`);
        const runtime = await openRuntime(b.config, silentLogger);
        const far = { ...b, env: { ...b.env, REDIS_URL: `redis://127.0.0.1:${proxy.port}` } };
        const workers = Array.from({ length: processes }, () => spawnWorkerProcess(far, concurrency));
        for (let i = 0; i < 600 && (await workerCount(runtime.redis, b.prefix, 'acme')) < processes; i++)
          await sleep(100);
        await sleep(500);
        const from = (await counter.arrivals()).length;
        const { run, startedAt } = await importAndWait(runtime, file, 200, CREATES ? 'deal.create' : 'deal.update');
        const seconds = (Date.parse(run.finishedAt ?? new Date().toISOString()) - startedAt) / 1000;
        const arrivals = await counter.arrivals(from);
        const limited = arrivals.filter((a) => a.status === 429).length;
        const share = shareAfter(arrivals, LIMIT, 5000);
        const busiest = busiestWindow(
          arrivals.map((a) => a.at),
          1000,
        );
        // How close the known limit came to a window of one too many (the margin left, in ms).
        const span = tightestSpan(
          arrivals.map((a) => a.at),
          LIMIT + 1,
        );
        console.log(
          `| ${delay} ms | ${mode} | ${processes} × ${concurrency} | ${share === undefined ? '–' : fmt(share, 3)} | ${limited} | ${busiest} (${Number.isFinite(span) ? fmt(span, 0) : '–'} ms) | ${fmt(seconds)} s (${run.counts.succeeded}/${ROWS}) | ${loadavg()[0]!.toFixed(1)} |`,
        );
        if (process.env.BENCH_TRACE) console.log(traceLine(arrivals));
        await stopProcesses(workers);
        await runtime.close();
        await dropPrefix(b.prefix);
        removeBenchDir(b);
      }
    await stopChild(proxy.child);
  }
  for (const c of busy) c.kill('SIGKILL');
  await counter.close();
  await sim.stop();
  await redisServer.stop();
}

/** Where a run's share went: its 429s' times and each second's successful requests (from the first request). */
function traceLine(arrivals: readonly Arrival[]): string {
  if (arrivals.length === 0) return '  (no requests)';
  const first = arrivals[0]!.at;
  const at = (a: Arrival) => ((a.at - first) / 1000).toFixed(2);
  const perSecond: number[] = [];
  for (const a of arrivals) {
    if (a.status === 429) continue;
    const second = Math.floor((a.at - first) / 1000);
    perSecond[second] = (perSecond[second] ?? 0) + 1;
  }
  return (
    `  429s at ${
      arrivals
        .filter((a) => a.status === 429)
        .map(at)
        .join(', ') || 'none'
    } s; ` + `per second: ${Array.from(perSecond, (n) => n ?? 0).join(' ')}`
  );
}
