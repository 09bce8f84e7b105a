/**
 * /healthz while the run page's error-text filter is under load (issue 20, item 9: "with 100
 * concurrent filter requests on a 20,000-row run, /healthz answers within 0.5 s").
 *
 *   npx tsx bench/dashboard-search.ts [rounds, default 5] [requests per round, default 100]
 *
 * The dashboard is `crm-sync dashboard` from the compiled dist/ in its own process, as
 * production runs it (default limits: 2 searches at a time, 32 waiting, 5,000 rows a request).
 * A run with 20,000 failed rows is written straight to the run store (one in 1,000 mentions
 * "needle"). Each round, this process fires the filter requests all at once
 * (`/runs/<id>?q=needle-<i>`, JSON, bearer token; none matches, so each scans its full 5,000
 * rows) while a worker thread, with an event loop of its own, asks /healthz every 10 ms on a
 * fresh connection (as a probe does) and times each answer. Before the rounds, the same probe
 * runs for 2 s on the idle dashboard.
 *
 * To tell the dashboard blocking its own event loop from the machine being busy, the dashboard
 * and an idle control process (plain node, a timer and nothing else) both carry a loop monitor:
 * perf_hooks.monitorEventLoopDelay, plus a 10 ms timer that notes the process's CPU time
 * (process.cpuUsage) at each tick. For the dashboard each round prints the longest delay and
 * the CPU time spent during it, and the most CPU spent between any two ticks: an upper bound
 * on its longest synchronous stretch (it counts GC and other threads too). A delay far longer
 * than the CPU in it, with the idle control delayed as well, is time spent waiting for a core.
 *
 * The machine's load average is printed before and after: the figures are only comparable
 * under a similar load (2 shared cores here).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { RunStore } from '../src/runs/index.js';
import { deleteKeysWithPrefix } from '../src/runtime/index.js';
import { seedFailedRun } from '../test/helpers/seed-runs.js';
import { CLI, cpuSeconds, fmt, startDashboardProcess } from './bench-lib.js';

const TOKEN = 'bench-dashboard-token-0123456789abcdef';
const ROWS = 20_000;
const rounds = Number(process.argv[2] ?? 5);
const perRound = Number(process.argv[3] ?? 100);
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const dir = mkdtempSync(join(tmpdir(), 'crm-sync-bench-search-'));
const prefix = `crm-sync-bench-search-${Date.now().toString(36)}`;
const configPath = join(dir, 'crm-sync.config.json');
writeFileSync(
  configPath,
  JSON.stringify({
    redisUrl,
    workspaces: { acme: { baseUrl: 'http://acme.localhost:9/api/external', apiKeyEnv: 'BENCH_UNUSED_KEY' } },
  }),
);

/**
 * Loaded into a process with --import: its event-loop delay histogram, written to
 * BENCH_LOOP_FILE and reset on SIGUSR2 (so each round gets its own figures).
 */
const LOOP_MONITOR = join(dir, 'loop-monitor.mjs');
writeFileSync(
  LOOP_MONITOR,
  `import { monitorEventLoopDelay } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
const h = monitorEventLoopDelay({ resolution: 10 });
h.enable();
const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
let last = performance.now();
let lastCpu = cpuMs();
let gap = 0;
let cpuInGap = 0;
let mostCpu = 0;
setInterval(() => {
  const now = performance.now();
  const cpu = cpuMs();
  if (now - last - 10 > gap) { gap = now - last - 10; cpuInGap = cpu - lastCpu; }
  mostCpu = Math.max(mostCpu, cpu - lastCpu);
  last = now;
  lastCpu = cpu;
}, 10).unref();
process.on('SIGUSR2', () => {
  writeFileSync(
    process.env.BENCH_LOOP_FILE,
    JSON.stringify({ p99: h.percentile(99) / 1e6, max: h.max / 1e6, gap, cpuInGap, mostCpu }),
  );
  h.reset();
  gap = 0;
  cpuInGap = 0;
  mostCpu = 0;
});
`,
);

interface LoopDelay {
  p99: number;
  max: number;
  /** The longest late tick of the 10 ms timer (ms late), and the process's CPU ms during it. */
  gap: number;
  cpuInGap: number;
  /** The most CPU ms the process used between two ticks. */
  mostCpu: number;
}

/** Asks a process carrying LOOP_MONITOR for its event-loop delay since the last ask. */
async function loopDelay(child: ChildProcess, file: string): Promise<LoopDelay> {
  if (existsSync(file)) unlinkSync(file);
  child.kill('SIGUSR2');
  for (let i = 0; i < 400 && !existsSync(file); i++) await sleep(10);
  await sleep(10); // written with one writeFileSync: give it the moment to finish
  return JSON.parse(readFileSync(file, 'utf8')) as LoopDelay;
}

const DASH_LOOP = join(dir, 'dashboard-loop.json');
const CONTROL_LOOP = join(dir, 'control-loop.json');

/** One GET on a fresh connection; resolves with its status (0 = connection error). */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

/**
 * The /healthz probe, in a worker thread: its timings are not delayed by this process parsing
 * a hundred answers at once. Plain JavaScript (eval), so it needs no TypeScript loader.
 */
const PROBE = `
const { parentPort, workerData } = require('node:worker_threads');
const { request } = require('node:http');
const latencies = [];
const failures = [];
let running = true;
parentPort.on('message', () => { running = false; });
const once = () => new Promise((resolve) => {
  const t0 = performance.now();
  const req = request({ host: '127.0.0.1', port: workerData.port, path: '/healthz', agent: false }, (res) => {
    res.resume();
    res.on('end', () => resolve({ ms: performance.now() - t0, status: res.statusCode }));
  });
  req.on('error', (e) => resolve({ ms: performance.now() - t0, status: 0 }));
  req.end();
});
(async () => {
  while (running) {
    const { ms, status } = await once();
    latencies.push(ms);
    if (status !== 200) failures.push(status);
    await new Promise((r) => setTimeout(r, 10));
  }
  parentPort.postMessage({ latencies, failures });
})();
`;

interface ProbeResult {
  latencies: number[];
  failures: number[];
}

function startProbe(port: number): { stop: () => Promise<ProbeResult> } {
  const worker = new Worker(PROBE, { eval: true, workerData: { port } });
  const done = new Promise<ProbeResult>((resolve, reject) => {
    worker.once('message', (m: ProbeResult) => resolve(m));
    worker.once('error', reject);
  });
  return {
    stop: async () => {
      worker.postMessage('stop');
      const result = await done;
      await worker.terminate();
      return result;
    },
  };
}

function summary(latencies: number[]): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  const p = (q: number) => fmt(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN);
  return `${sorted.length} probes, p50 ${p(0.5)} ms, p95 ${p(0.95)} ms, max ${p(1)} ms`;
}

function load(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
}

const redis = new Redis(redisUrl);
const store = new RunStore({ redis, prefix });
const runId = await seedFailedRun(store, ROWS);

const dash = await startDashboardProcess({
  configPath,
  prefix,
  token: TOKEN,
  nodeArgs: ['--import', LOOP_MONITOR],
  env: { BENCH_LOOP_FILE: DASH_LOOP },
});
// The control: a node process with nothing to do but its timers.
const control = spawn(process.execPath, ['--import', LOOP_MONITOR, '-e', 'setInterval(() => {}, 1000)'], {
  env: { ...process.env, BENCH_LOOP_FILE: CONTROL_LOOP },
  stdio: 'ignore',
});
await sleep(300);
const headers = { authorization: `Bearer ${TOKEN}`, accept: 'application/json' };
try {
  console.log(
    `dashboard search load (${CLI}, Node ${process.version}); ${rounds} rounds of ${perRound} concurrent filter requests on a ${ROWS.toLocaleString('en-US')}-row run`,
  );
  console.log(`load average (1/5/15 min) at start: ${load()}`);
  // One search first, so the rounds do not time the dashboard's first compile of the route.
  await get(dash.port, `/runs/${runId}?q=warm-up`, headers);

  await loopDelay(dash.child, DASH_LOOP);
  await loopDelay(control, CONTROL_LOOP);
  const idle = startProbe(dash.port);
  await sleep(2000);
  const idleProbe = await idle.stop();
  const [idleDash, idleControl] = [await loopDelay(dash.child, DASH_LOOP), await loopDelay(control, CONTROL_LOOP)];
  console.log(
    `idle: /healthz ${summary(idleProbe.latencies)}; event-loop delay max: dashboard ${fmt(idleDash.max)} ms, control ${fmt(idleControl.max)} ms`,
  );

  console.log(
    '| round | requests | storm | answers | dashboard CPU | /healthz during it | dashboard loop delay p99 / max | its longest stall (CPU in it) | most CPU between ticks | control loop delay max | load (1 min) |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  const worst = { dash: 0, control: 0, mostCpu: 0 };
  const all: number[] = [];
  const statuses = new Map<number, number>();
  for (let round = 1; round <= rounds; round++) {
    await loopDelay(dash.child, DASH_LOOP);
    await loopDelay(control, CONTROL_LOOP);
    const probe = startProbe(dash.port);
    await sleep(50);
    const cpu0 = cpuSeconds(dash.pid);
    const t0 = performance.now();
    const answers = await Promise.all(
      Array.from({ length: perRound }, (_, i) => get(dash.port, `/runs/${runId}?q=needle-${round}-${i}`, headers)),
    );
    const stormMs = performance.now() - t0;
    const cpu = cpuSeconds(dash.pid) - cpu0;
    await sleep(50);
    const { latencies, failures } = await probe.stop();
    const [dashLoop, controlLoop] = [await loopDelay(dash.child, DASH_LOOP), await loopDelay(control, CONTROL_LOOP)];
    worst.dash = Math.max(worst.dash, dashLoop.max);
    worst.control = Math.max(worst.control, controlLoop.max);
    worst.mostCpu = Math.max(worst.mostCpu, dashLoop.mostCpu);
    all.push(...latencies);
    const counts = new Map<number, number>();
    for (const s of answers) counts.set(s, (counts.get(s) ?? 0) + 1);
    for (const [s, n] of counts) statuses.set(s, (statuses.get(s) ?? 0) + n);
    const byStatus = [...counts]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${n}× ${s}`)
      .join(', ');
    console.log(
      `| ${round} | ${perRound} | ${fmt(stormMs / 1000, 2)} s | ${byStatus} | ${fmt(cpu, 2)} s | ${summary(latencies)}${failures.length > 0 ? `, ${failures.length} not 200` : ''} | ${fmt(dashLoop.p99)} / ${fmt(dashLoop.max)} ms | ${fmt(dashLoop.gap)} ms (${fmt(dashLoop.cpuInGap)} ms) | ${fmt(dashLoop.mostCpu)} ms | ${fmt(controlLoop.max)} ms | ${loadavg()[0]!.toFixed(2)} |`,
    );
    await sleep(1000);
  }
  const answered = [...statuses]
    .sort(([a], [b]) => a - b)
    .map(([s, n]) => `${n}× ${s}`)
    .join(', ');
  console.log(
    `all rounds: filter answers ${answered}; /healthz ${summary(all)}; longest event-loop delay: dashboard ${fmt(worst.dash)} ms, control ${fmt(worst.control)} ms; most dashboard CPU between two ticks ${fmt(worst.mostCpu)} ms`,
  );
  console.log(`load average (1/5/15 min) at end: ${load()}`);
} finally {
  control.kill('SIGTERM');
  await dash.stop();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
  rmSync(dir, { recursive: true, force: true });
}
