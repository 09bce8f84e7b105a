/**
 * Change control (issue 33, item 7): `crm-sync plan` of contact updates, then `crm-sync apply`
 * of a plan at a known limit, both as the compiled CLI in child processes.
 *
 *   npx tsx bench/plan-apply.ts [planRows=100000] [applyRows=10000] [processes=2] [limit=200]
 *
 * The simulator holds `planRows` contacts (and as many deals and leads) behind a request-counting
 * proxy (bench/request-counter.ts) and meters `limit` requests/s; the config gives the workspace
 * the same `rateLimit`. Every row renames its contact, matched by email, so every row is an update.
 * 1. Plan of `planRows` rows: wall time, peak RSS of the CLI process (/usr/bin/time -v), list
 *    requests at the proxy, Redis bytes per row (MEMORY USAGE of the plan's keys, and the growth
 *    of used_memory).
 * 2. Apply: a plan of the first `applyRows` rows (100,000 at 200/s would take 500 s), applied by
 *    `processes` worker processes (concurrency 8): requests (writes and the drift check's list
 *    pages, which read all `planRows` contacts) per second ÷ limit over the span of arrivals, 429s,
 *    busiest 1000 ms window; the request rate in the seconds with list pages and in those without.
 *    applyRows=0 skips it.
 * BENCH_PLAN_NODE_OPTIONS: NODE_OPTIONS for the plan process only (e.g. --max-old-space-size=150,
 * to see whether its peak RSS is live data or a heap V8 let grow).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { silentLogger } from '../src/log/index.js';
import { workerCount } from '../src/queue/index.js';
import { openRuntime } from '../src/runtime/index.js';
import { generateSeedData } from '../src/sim/seed-data.js';
import type { RunRecord } from '../src/runs/index.js';
import * as lib from './bench-lib.js';
import { busiestWindow, startRequestCounter, type Arrival } from './request-counter.js';

const PLAN_ROWS = Number(process.argv[2] ?? 100_000);
const APPLY_ROWS = Number(process.argv[3] ?? 10_000);
const PROCESSES = Number(process.argv[4] ?? 2);
const LIMIT = Number(process.argv[5] ?? 200);

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const redisServer = await lib.startPrivateRedis();
const sim = await lib.startSimProcess({ records: PLAN_ROWS, rate: `${LIMIT}/s` });
const counter = await startRequestCounter(sim.port);
const b = lib.benchConfig({ ...sim, baseUrl: counter.baseUrlOf('acme') }, { max: LIMIT, durationMs: 1000 });
const redis = new Redis(redisServer.url);
const contacts = generateSeedData(7, PLAN_ROWS).contacts; // what `sim --seed 7` serves
const csv = (rows: number, tag: string) => {
  const file = join(b.dir, `contacts-${tag}.csv`);
  const q = (v: string) => `"${v.replaceAll('"', '""')}"`;
  const lines = contacts.slice(0, rows).map((c) => `${q(c.email)},${q(`${c.name} ${tag}`)}`);
  writeFileSync(file, `email,name\n${lines.join('\n')}\n`);
  return file;
};

/** The compiled CLI in a child process under /usr/bin/time -v: its stdout, wall time and peak RSS. */
async function cli(
  args: string[],
  nodeOptions?: string,
): Promise<{ out: string; ms: number; rssMb: number; code: number | null }> {
  const started = performance.now();
  const child = spawn('/usr/bin/time', ['-v', process.execPath, lib.CLI, '--log-level', 'error', ...args], {
    cwd: lib.ROOT,
    env: nodeOptions ? { ...b.env, NODE_OPTIONS: nodeOptions } : b.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  const kb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(err)?.[1]);
  if (!kb) throw new Error(`no /usr/bin/time figures: ${err}`);
  return { out, ms: performance.now() - started, rssMb: kb / 1024, code };
}

async function usedMemory(): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
}

async function plan(file: string) {
  const from = (await counter.arrivals()).length;
  const before = await usedMemory();
  const args = ['plan', file, '--op', 'contact.update', '-w', 'acme', '--match', 'email', '--json'];
  const r = await cli(args, process.env.BENCH_PLAN_NODE_OPTIONS);
  if (r.code !== 0) throw new Error(`plan exited ${r.code}: ${r.out}`);
  const after = await usedMemory();
  const { planId, counts, prediction } = JSON.parse(r.out) as {
    planId: string;
    counts: Record<string, number>;
    prediction: unknown;
  };
  let bytes = 0;
  let keys = 0;
  for await (const batch of redis.scanStream({ match: `${b.prefix}:plan:*${planId}*`, count: 1000 }))
    for (const key of batch as string[]) {
      bytes += (await redis.memory('USAGE', key, 'SAMPLES', 0)) ?? 0;
      keys++;
    }
  return {
    ...r,
    planId,
    counts,
    prediction,
    arrivals: await counter.arrivals(from),
    bytes,
    keys,
    usedDelta: after - before,
  };
}

console.log(
  `plan/apply: simulator with ${PLAN_ROWS} contacts at ${LIMIT} req/s (token bucket), rateLimit ${LIMIT}/1000 ms; load ${load()}`,
);
const p = await plan(csv(PLAN_ROWS, 'P'));
const lists = p.arrivals.filter((a) => a.method === 'GET').length;
console.log(
  `\n1. plan of ${PLAN_ROWS} rows (${JSON.stringify(p.counts)}), load at end ${load()}\n` +
    `  wall ${lib.fmt(p.ms / 1000, 2)} s = ${lib.fmt(PLAN_ROWS / (p.ms / 1000), 0)} rows/s; peak RSS ${lib.fmt(p.rssMb)} MB\n` +
    `  CRM requests ${p.arrivals.length}: ${lists} list pages = ${lib.fmt((lists / PLAN_ROWS) * 100, 3)} per 100 rows; ` +
    `429s ${p.arrivals.filter((a) => a.status === 429).length}\n` +
    `  Redis: ${p.keys} keys, MEMORY USAGE ${p.bytes} B = ${lib.fmt(p.bytes / PLAN_ROWS)} B/row; ` +
    `used_memory +${p.usedDelta} B = ${lib.fmt(p.usedDelta / PLAN_ROWS)} B/row`,
);

if (APPLY_ROWS === 0) process.exit(0); // bench-lib's exit hook stops the children
await sleep(2000); // the simulator's bucket refills
const a = await plan(csv(APPLY_ROWS, 'A'));
const runtime = await openRuntime(b.config, silentLogger);
const workers = Array.from({ length: PROCESSES }, () => lib.spawnWorkerProcess(b, 8));
for (let i = 0; i < 300 && (await workerCount(runtime.redis, b.prefix, 'acme')) < PROCESSES; i++) await sleep(100);
await sleep(2000);
const from = (await counter.arrivals()).length;
const applied = await cli(['apply', a.planId, '--wait', '--json']);
const run = JSON.parse(applied.out) as RunRecord;
const arrivals: Arrival[] = await counter.arrivals(from);
const times = arrivals.map((x) => x.at);
const seconds = (Math.max(...times) - Math.min(...times)) / 1000;
const ok = arrivals.filter((x) => x.status >= 200 && x.status < 300);
const okLists = ok.filter((x) => x.method === 'GET').length;
// Whole seconds from the first arrival: those in which a drift pass read list pages, and the rest.
const start = Math.min(...times);
const perSecond = new Map<number, { all: number; lists: number }>();
for (const x of arrivals) {
  const s = perSecond.get(Math.floor((x.at - start) / 1000)) ?? { all: 0, lists: 0 };
  s.all++;
  if (x.method === 'GET') s.lists++;
  perSecond.set(Math.floor((x.at - start) / 1000), s);
}
const full = [...perSecond.entries()].filter(([sec]) => sec < Math.floor(seconds)).map(([, s]) => s);
const rate = (l: typeof full) => (l.length ? l.reduce((n, s) => n + s.all, 0) / l.length : NaN);
const withLists = full.filter((s) => s.lists > 0);
const without = full.filter((s) => s.lists === 0);
console.log(
  `\n2. apply of a ${APPLY_ROWS}-row plan (${JSON.stringify(a.counts)}, predicted ${JSON.stringify(a.prediction)}), ${PROCESSES} worker process(es) × 8, load at end ${load()}\n` +
    `  run ${run.status}: ${JSON.stringify(run.counts)}; apply CLI wall ${lib.fmt(applied.ms / 1000, 1)} s, peak RSS ${lib.fmt(applied.rssMb)} MB\n` +
    `  requests ${arrivals.length} over ${lib.fmt(seconds, 1)} s (first to last arrival): ${ok.length - okLists} writes + ${okLists} list pages ok; ` +
    `429s ${arrivals.filter((x) => x.status === 429).length}; other non-2xx ${arrivals.length - ok.length - arrivals.filter((x) => x.status === 429).length}\n` +
    `  utilisation (2xx requests/s ÷ ${LIMIT}) ${lib.fmt(ok.length / seconds / LIMIT, 3)}; writes alone ${lib.fmt((ok.length - okLists) / seconds / LIMIT, 3)}; ` +
    `busiest 1000 ms window ${busiestWindow(times, 1000)}\n` +
    `  seconds with list pages: ${withLists.length}, ${lib.fmt(rate(withLists))} req/s; ` +
    `without: ${without.length}, ${lib.fmt(rate(without))} req/s`,
);

await lib.stopProcesses(workers);
await runtime.close();
redis.disconnect();
await counter.close();
await sim.stop();
lib.removeBenchDir(b);
await redisServer.stop();
