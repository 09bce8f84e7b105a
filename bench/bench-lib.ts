/**
 * Shared parts of the benchmarks: a simulator in a child process (so it does not share an
 * event loop with what is measured), worker processes, Redis memory sampling, peak RSS of
 * processes. Everything targets loopback and stops by itself.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'node:http';
import got, { type Got } from 'got';
import { Redis } from 'ioredis';
import { configFromObject, type Config } from '../src/config/index.js';
import { loopbackLookup } from '../src/crm/index.js';
import { importFile } from '../src/lifecycle/index.js';
import type { RunRecord } from '../src/runs/index.js';
import { deleteKeysWithPrefix, freePort, type Runtime } from '../src/runtime/index.js';

export const ROOT = new URL('..', import.meta.url).pathname;

/**
 * Benchmarks run the CLI as production does: the compiled bundle (built once here; what the bin
 * runs without OTEL_*), not the TypeScript through tsx, whose compiler would add ~50 MB to every
 * process measured. BENCH_UNBUNDLED=1 runs dist/cli.js instead, to compare.
 */
export const CLI: string = (() => {
  const built = spawnSync(process.execPath, ['scripts/build.js'], { cwd: ROOT, stdio: 'inherit' });
  if (built.status !== 0) throw new Error('npm run build failed');
  return process.env.BENCH_UNBUNDLED || !existsSync(join(ROOT, 'dist', 'bundle', 'cli.js'))
    ? 'dist/cli.js'
    : 'dist/bundle/cli.js';
})();

export interface SimProcess {
  port: number;
  /** acme's base URL. */
  baseUrl: string;
  baseUrlOf(workspace: string): string;
  apiKey: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

const spawned = new Set<ChildProcess>();
// A benchmark that throws must not leave its simulator and workers running.
process.on('exit', () => {
  for (const c of spawned) if (c.exitCode === null) c.kill('SIGKILL');
});

/** `crm-sync sim` in its own process. */
export async function startSimProcess(args: {
  records: number;
  rate?: string;
  latencyMs?: number;
  /** Workspaces served, each with the same key (the rate applies to each). Default ['acme']. */
  workspaces?: string[];
}): Promise<SimProcess> {
  const port = await freePort();
  const apiKey = 'bench-key';
  const child = spawn(
    process.execPath,
    [
      CLI,
      '--log-level',
      'error',
      'sim',
      '--port',
      String(port),
      ...(args.workspaces ?? ['acme']).flatMap((ws) => ['--workspace', `${ws}:${apiKey}`]),
      '--records',
      String(args.records),
      '--seed',
      '7',
      ...(args.rate ? ['--rate', args.rate] : []),
      ...(args.latencyMs ? ['--latency', String(args.latencyMs)] : []),
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  spawned.add(child);
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`sim exited ${code}`)));
    child.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('http://')) resolve();
    });
  });
  child.stdout?.resume();
  return {
    port,
    apiKey,
    child,
    baseUrl: `http://acme.localhost:${port}/api/external`,
    baseUrlOf: (ws) => `http://${ws}.localhost:${port}/api/external`,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/**
 * The bare got baseline of bench/throughput.ts: keep-alive, `concurrency` sockets, no retry,
 * nothing of crm-sync but the loopback lookup. `close()` ends its sockets.
 */
export function bareGot(sim: SimProcess, concurrency: number): { http: Got; close(): void } {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const http = got.extend({
    prefixUrl: `${sim.baseUrl}/`,
    headers: { 'x-api-key': sim.apiKey, accept: 'application/json' },
    agent: { http: agent },
    dnsLookup: loopbackLookup,
    retry: { limit: 0 },
  });
  return { http, close: () => agent.destroy() };
}

export interface BenchEnv {
  dir: string;
  configPath: string;
  env: NodeJS.ProcessEnv;
  prefix: string;
  /** The same config, loaded, for the benchmark process itself. */
  config: Config;
}

/** A config file + env for worker processes, with a unique Redis prefix. */
export function benchConfig(sim: SimProcess, rateLimit?: { max: number; durationMs: number }): BenchEnv {
  const dir = mkdtempSync(join(tmpdir(), 'crm-sync-bench-'));
  const prefix = `crm-sync-bench-${Date.now().toString(36)}`;
  const configPath = join(dir, 'crm-sync.config.json');
  // BENCH_READ_BEFORE=false: plain imports keep no before-values (the workspace's readBefore),
  // to measure what keeping them costs against the same tree.
  const readBefore = process.env.BENCH_READ_BEFORE === 'false' ? { readBefore: false } : {};
  // BENCH_ROWS_PER_JOB=N: update rows per queue job (the workspace's rowsPerJob; default 10).
  const perJob = process.env.BENCH_ROWS_PER_JOB ? { rowsPerJob: Number(process.env.BENCH_ROWS_PER_JOB) } : {};
  const raw = {
    workspaces: {
      acme: {
        baseUrl: sim.baseUrl,
        apiKeyEnv: 'BENCH_KEY',
        ...(rateLimit ? { rateLimit } : {}),
        ...readBefore,
        ...perJob,
      },
    },
  };
  writeFileSync(configPath, JSON.stringify(raw));
  const env = { ...process.env, BENCH_KEY: sim.apiKey, CRM_SYNC_PREFIX: prefix, CRM_SYNC_CONFIG: configPath };
  process.env.BENCH_KEY = sim.apiKey;
  return { dir, configPath, prefix, env, config: configFromObject(raw, { source: configPath, env }) };
}

/** Imports a deal-update file through the library and waits for the run to end. */
export async function importAndWait(
  runtime: Runtime,
  file: string,
  pollMs = 100,
  op: 'deal.update' | 'deal.create' = 'deal.update',
): Promise<{ run: RunRecord; startedAt: number }> {
  const startedAt = Date.now();
  const rowsPerJob = runtime.config.workspaces.acme?.rowsPerJob;
  const { run } = await importFile({
    file,
    op,
    workspace: 'acme',
    queue: runtime.queue('acme'),
    store: runtime.store,
    ...(rowsPerJob ? { rowsPerJob } : {}),
  });
  let final = run;
  while (final.status === 'running') {
    await sleep(pollMs);
    final = await runtime.store.requireRun(run.id);
  }
  return { run: final, startedAt };
}

/** BENCH_CPU_PROF=<dir>: each worker process writes a V8 CPU profile there when it exits. */
function workerProfileArgs(): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/**
 * BENCH_WORKER_LOG=<path>: each worker process logs at debug level to `<path>.<n>` (a 429's
 * learned rate, every request's answer), for reading what a run did; off, it logs errors only,
 * nowhere.
 */
let workerLogs = 0;
function workerLog(): { level: string; fd: number | 'ignore' } {
  const path = process.env.BENCH_WORKER_LOG;
  return path ? { level: 'debug', fd: openSync(`${path}.${++workerLogs}`, 'w') } : { level: 'error', fd: 'ignore' };
}

export function spawnWorkerProcess(b: BenchEnv, concurrency: number): ChildProcess {
  const log = workerLog();
  const child = spawn(
    process.execPath,
    [...workerProfileArgs(), CLI, '--log-level', log.level, 'worker', '--concurrency', String(concurrency)],
    {
      cwd: ROOT,
      env: b.env,
      stdio: ['ignore', log.fd, log.fd],
    },
  );
  spawned.add(child);
  return child;
}

export interface DashboardProcess {
  child: ChildProcess;
  pid: number;
  port: number;
  stop(): Promise<void>;
}

/**
 * `crm-sync dashboard --port 0` in a process of its own (compiled when current), under `prefix`
 * with `token`; resolves once it says where it listens. `nodeArgs` go before the CLI (e.g. an
 * `--import` of a loop monitor), `env` on top of this process's.
 */
export async function startDashboardProcess(o: {
  configPath: string;
  prefix: string;
  token: string;
  nodeArgs?: string[];
  env?: NodeJS.ProcessEnv;
}): Promise<DashboardProcess> {
  const child = spawn(
    process.execPath,
    [...(o.nodeArgs ?? []), CLI, '--config', o.configPath, '--log-level', 'error', 'dashboard', '--port', '0'],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        CRM_SYNC_PREFIX: o.prefix,
        CRM_SYNC_DASHBOARD_TOKEN: o.token,
        BENCH_UNUSED_KEY: 'unused',
        ...o.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  for (let i = 0; i < 400 && !/on http:\/\//.test(out); i++) await sleep(25);
  const port = Number(/:(\d+)/.exec(out.slice(out.indexOf('http://')))?.[1]);
  if (!port) throw new Error(`dashboard did not start: ${out}${err}`);
  return {
    child,
    pid: child.pid!,
    port,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/** Removes a benchmark's temp dir (the generated files can be large). */
export function removeBenchDir(b: BenchEnv): void {
  rmSync(b.dir, { recursive: true, force: true });
}

export async function stopProcesses(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (c) => {
      if (c.exitCode !== null) return;
      c.kill('SIGTERM');
      await new Promise((r) => c.once('exit', r));
    }),
  );
}

/** Peak resident set of a process so far (Linux VmHWM), in MB. */
export function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

/** Samples Redis used_memory every 250 ms; returns a stop function giving the peak in MB. */
export function sampleRedisMemory(
  url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
): () => Promise<{ peakMb: number; startMb: number }> {
  const redis = new Redis(url);
  let peak = 0;
  let start = -1;
  let running = true;
  const loop = (async () => {
    while (running) {
      const info = await redis.info('memory');
      const used = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0) / 1024 / 1024;
      if (start < 0) start = used;
      peak = Math.max(peak, used);
      await sleep(250);
    }
  })();
  return async () => {
    running = false;
    await loop;
    redis.disconnect();
    return { peakMb: peak, startMb: start };
  };
}

/** Removes every key under the prefix (benchmarks clean up after themselves). */
export async function dropPrefix(
  prefix: string,
  url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
): Promise<void> {
  const redis = new Redis(url);
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
}

export function fmt(n: number, digits = 1): string {
  return n.toFixed(digits);
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name; utime and stime are the 14th and 15th fields.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim() || 100);

/** The pid of the Redis server the benchmark talks to, when it runs on this machine. */
export async function redisPid(url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'): Promise<number | undefined> {
  const redis = new Redis(url);
  const info = await redis.info('server');
  redis.disconnect();
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  return Number.isFinite(pid) && pid > 0 ? pid : undefined;
}

/** CPU seconds used by each named process between `start()` and the function it returns. */
export function cpuMeter(pids: Record<string, number | undefined>): () => Record<string, number> {
  const read = () =>
    Object.fromEntries(
      Object.entries(pids).map(([k, pid]) => [
        k,
        pid === undefined ? NaN : pid === process.pid ? selfCpu() : cpuSeconds(pid),
      ]),
    );
  const before = read();
  return () => {
    const after = read();
    return Object.fromEntries(Object.keys(after).map((k) => [k, after[k]! - before[k]!]));
  };
}
function selfCpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/**
 * A Redis server of the benchmark's own on a free loopback port (no persistence), so command
 * counts (INFO commandstats) see only the benchmark's traffic, not other work on the machine.
 * Sets REDIS_URL for this process and for the processes it spawns afterwards.
 */
export async function startPrivateRedis(): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  spawned.add(child);
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => undefined); // not up yet: asked again below
    const up = await probe.connect().then(
      () => true,
      () => false,
    );
    probe.disconnect();
    if (up) break;
    if (i > 50) throw new Error('redis-server did not start');
    await sleep(100);
  }
  process.env.REDIS_URL = url;
  return {
    url,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/**
 * Commands Redis has run (INFO commandstats, which counts those Lua scripts call too: `all`),
 * and how many of them were script calls (EVALSHA, EVAL).
 */
export async function redisCommandCounts(
  url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
): Promise<{ all: number; scripts: number; byCommand: Map<string, number> }> {
  const redis = new Redis(url);
  const commandstats = await redis.info('commandstats');
  redis.disconnect();
  let all = 0;
  let scripts = 0;
  const byCommand = new Map<string, number>();
  for (const m of commandstats.matchAll(/cmdstat_(\S+?):calls=(\d+)/g)) {
    all += Number(m[2]);
    byCommand.set(m[1]!, Number(m[2]));
    if (m[1] === 'evalsha' || m[1] === 'eval') scripts += Number(m[2]);
  }
  return { all, scripts, byCommand };
}

/**
 * Counts the commands clients send (a Lua script call is one), through MONITOR, which also
 * shows the commands scripts run (source "lua"): those are left out here.
 */
export async function countSentCommands(
  url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
): Promise<{ sent(): number; stop(): Promise<void> }> {
  const redis = new Redis(url);
  const monitor = await redis.monitor();
  let sent = 0;
  monitor.on('monitor', (_time: string, _args: string[], source: string) => {
    if (source !== 'lua') sent++;
  });
  return {
    sent: () => sent,
    async stop() {
      monitor.disconnect();
      redis.disconnect();
    },
  };
}
