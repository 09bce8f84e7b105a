/**
 * Shared parts of the duplicate-safe-create benchmarks (create-kill-loop.ts,
 * create-lookup-passes.ts): a simulator process with fault flags, a counting HTTP proxy of our
 * own between the workers and the simulator (the simulator's counters live in its process and
 * are not served over HTTP), worker processes that log to a file, reading the simulator's deals
 * back, and run bookkeeping. Loopback only; every wait is bounded; every child is killed on exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { configFromObject, type Config } from '../src/config/index.js';
import type { RunCounts, RunRecord, RunStore } from '../src/runs/index.js';
import { freePort } from '../src/runtime/index.js';
import { CLI, ROOT } from './bench-lib.js';

const children = new Set<ChildProcess>();
const killAll = () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
};
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    killAll();
    process.exit(130);
  });
}

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

export const API_KEY = 'bench-key';

export interface FaultSim {
  port: number;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** `crm-sync sim` (compiled CLI) in its own process, with latency and fault flags. */
export async function startFaultSim(o: {
  records: number;
  latencyMs: number;
  errorRate?: number;
  resetRate?: number;
  dropRate?: number;
}): Promise<FaultSim> {
  const port = await freePort();
  const args = [
    CLI,
    '--log-level',
    'error',
    'sim',
    '--port',
    String(port),
    '--workspace',
    `acme:${API_KEY}`,
    '--records',
    String(o.records),
    '--seed',
    '7',
    '--latency',
    String(o.latencyMs),
    '--error-rate',
    String(o.errorRate ?? 0),
    '--reset-rate',
    String(o.resetRate ?? 0),
    '--drop-rate',
    String(o.dropRate ?? 0),
  ];
  const child = track(spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] }));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('sim did not start within 20 s')), 20_000);
    child.once('exit', (code) => reject(new Error(`sim exited ${code}`)));
    child.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('http://')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  child.stdout?.resume();
  return { port, child, stop: () => stopChild(child, 5000) };
}

/** SIGTERM, then SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export async function killNow(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

/* ---------------------------------------------------------------- counting proxy */

export interface Tally {
  requests: number;
  /** Answers forwarded to (or meant for) the client, by HTTP status. */
  status: Record<string, number>;
  /** The upstream connection ended without an answer (simulated reset or apply-then-drop). */
  noAnswer: number;
  /** The answer came but the client was gone (a killed worker). */
  clientGone: number;
  /** The client went away before its request body was complete: never forwarded. */
  neverForwarded: number;
  /** List pages only: page_number=1 answered 200, i.e. lookup passes that got under way. */
  firstPagesOk: number;
}

export type TallyKind = 'createDeal' | 'listDeals' | 'clockPage' | 'other';

export interface CountingProxy {
  port: number;
  tallies: Record<TallyKind, Tally>;
  snapshot(): Record<TallyKind, Tally>;
  close(): Promise<void>;
}

const emptyTally = (): Tally => ({
  requests: 0,
  status: {},
  noAnswer: 0,
  clientGone: 0,
  neverForwarded: 0,
  firstPagesOk: 0,
});

const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
];

function strip(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out = { ...headers };
  for (const h of HOP_BY_HOP) delete out[h];
  return out;
}

/**
 * A loopback HTTP proxy that counts what goes to the simulator: POST /v2/deals, GET /v2/deals
 * (list pages; page_size=1 pages, which workers use to read the CRM's clock, counted apart).
 * The request body is read whole, then (after an optional random extra delay, which adds to the
 * simulator's fixed latency) forwarded even if the client has gone meanwhile — as a network
 * delivers a request its sender died after sending. An upstream that ends without an answer
 * (the simulator's reset and apply-then-drop faults) destroys the client's socket, so the
 * client sees what it would see without the proxy.
 */
export async function startCountingProxy(o: {
  upstreamPort: number;
  extraDelayMs?: [number, number];
}): Promise<CountingProxy> {
  const tallies: Record<TallyKind, Tally> = {
    createDeal: emptyTally(),
    listDeals: emptyTally(),
    clockPage: emptyTally(),
    other: emptyTally(),
  };
  const agent = new Agent({ keepAlive: true, maxSockets: 512 });
  const [lo, hi] = o.extraDelayMs ?? [0, 0];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const isDeals = url.pathname === '/api/external/v2/deals';
    const kind: TallyKind =
      isDeals && req.method === 'POST'
        ? 'createDeal'
        : isDeals && req.method === 'GET'
          ? url.searchParams.get('page_size') === '1'
            ? 'clockPage'
            : 'listDeals'
          : 'other';
    const t = tallies[kind];
    t.requests++;
    const chunks: Buffer[] = [];
    let complete = false;
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => undefined);
    req.on('close', () => {
      if (!complete) t.neverForwarded++;
    });
    req.on('end', () => {
      complete = true;
      const body = Buffer.concat(chunks);
      const forward = () => {
        const headers = strip(req.headers);
        if (body.length > 0 || req.method === 'POST' || req.method === 'PATCH')
          headers['content-length'] = String(body.length);
        const up = request(
          { host: '127.0.0.1', port: o.upstreamPort, method: req.method, path: req.url, headers, agent },
          (ur) => {
            const code = String(ur.statusCode ?? 0);
            t.status[code] = (t.status[code] ?? 0) + 1;
            if (kind === 'listDeals' && code === '200' && (url.searchParams.get('page_number') ?? '1') === '1')
              t.firstPagesOk++;
            if (res.destroyed || req.socket.destroyed) {
              t.clientGone++;
              ur.resume();
              return;
            }
            const body2: Buffer[] = [];
            ur.on('data', (c: Buffer) => body2.push(c));
            ur.on('error', () => res.destroy());
            ur.on('end', () => {
              const payload = Buffer.concat(body2);
              if (res.destroyed) return;
              res.writeHead(ur.statusCode ?? 502, { ...strip(ur.headers), 'content-length': String(payload.length) });
              res.end(payload);
            });
          },
        );
        up.on('error', () => {
          t.noAnswer++;
          req.socket.destroy();
        });
        up.end(body);
      };
      const extra = hi > 0 ? lo + Math.random() * (hi - lo) : 0;
      if (extra > 0) setTimeout(forward, extra);
      else forward();
    });
  });
  server.keepAliveTimeout = 65_000;
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    tallies,
    snapshot: () => JSON.parse(JSON.stringify(tallies)) as Record<TallyKind, Tally>,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      agent.destroy();
    },
  };
}

export function tallyDiff(a: Tally, b: Tally): Tally {
  const status: Record<string, number> = {};
  for (const k of new Set([...Object.keys(a.status), ...Object.keys(b.status)])) {
    const d = (b.status[k] ?? 0) - (a.status[k] ?? 0);
    if (d) status[k] = d;
  }
  return {
    requests: b.requests - a.requests,
    status,
    noAnswer: b.noAnswer - a.noAnswer,
    clientGone: b.clientGone - a.clientGone,
    neverForwarded: b.neverForwarded - a.neverForwarded,
    firstPagesOk: b.firstPagesOk - a.firstPagesOk,
  };
}

export function fmtTally(t: Tally): string {
  const st = Object.entries(t.status)
    .sort()
    .map(([k, v]) => `${k}:${v}`)
    .join(' ');
  const passes = t.firstPagesOk ? `; passes begun (page 1 answered) ${t.firstPagesOk}` : '';
  return `${t.requests} requests (answers ${st || '-'}; no answer ${t.noAnswer}; client gone ${t.clientGone}; never forwarded ${t.neverForwarded}${passes})`;
}

/* ---------------------------------------------------------------- config, workers */

export interface CreateBenchEnv {
  dir: string;
  prefix: string;
  env: NodeJS.ProcessEnv;
  config: Config;
  logFile: string;
  raw: Record<string, unknown>;
}

export function createBenchConfig(o: {
  name: string;
  proxyPort: number;
  createSettleMs: number;
  requestTimeoutMs?: number;
}): CreateBenchEnv {
  const dir = mkdtempSync(join(tmpdir(), `crm-sync-${o.name}-`));
  const prefix = `crm-sync-bench-${o.name}-${Date.now().toString(36)}`;
  const configPath = join(dir, 'crm-sync.config.json');
  const ws = {
    baseUrl: `http://acme.localhost:${o.proxyPort}/api/external`,
    apiKeyEnv: 'BENCH_KEY',
    createSettleMs: o.createSettleMs,
    ...(o.requestTimeoutMs ? { requestTimeoutMs: o.requestTimeoutMs } : {}),
  };
  const raw = { workspaces: { acme: ws }, resultsDir: join(dir, 'results') };
  writeFileSync(configPath, JSON.stringify(raw));
  const env = { ...process.env, BENCH_KEY: API_KEY, CRM_SYNC_PREFIX: prefix, CRM_SYNC_CONFIG: configPath };
  process.env.BENCH_KEY = API_KEY;
  const config = configFromObject(raw, { source: configPath, env });
  return { dir, prefix, env, config, logFile: join(dir, 'workers.log'), raw };
}

/** A `crm-sync worker` process (compiled CLI) logging JSON at info level to the bench's log file. */
export function spawnLoggedWorker(b: CreateBenchEnv, o: { concurrency: number; lockMs: number }): ChildProcess {
  const fd = openSync(b.logFile, 'a');
  const child = spawn(
    process.execPath,
    [
      CLI,
      '--log-level',
      'info',
      'worker',
      '--concurrency',
      String(o.concurrency),
      '--lock-ms',
      String(o.lockMs),
      '--close-timeout-ms',
      '10000',
    ],
    {
      cwd: ROOT,
      env: b.env,
      stdio: ['ignore', fd, fd],
    },
  );
  closeSync(fd);
  return track(child);
}

/** `crm-sync runs retry <id>` (compiled CLI); returns its stdout. Bounded to 5 minutes. */
export async function runsRetry(b: CreateBenchEnv, runId: string): Promise<{ code: number | null; out: string }> {
  const child = track(
    spawn(process.execPath, [CLI, '--log-level', 'warn', 'runs', 'retry', runId], {
      cwd: ROOT,
      env: b.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  clearTimeout(timer);
  return { code, out: out.trim() };
}

/** Polls until the run is no longer `running` or `timeoutMs` passed. */
export async function waitRun(
  store: RunStore,
  runId: string,
  timeoutMs: number,
  onTick?: (run: RunRecord) => void,
  tickMs = 15_000,
): Promise<{ run: RunRecord; timedOut: boolean }> {
  const until = Date.now() + timeoutMs;
  let lastTick = 0;
  for (;;) {
    const run = await store.requireRun(runId);
    if (run.status !== 'running') return { run, timedOut: false };
    if (Date.now() >= until) return { run, timedOut: true };
    if (onTick && Date.now() - lastTick >= tickMs) {
      lastTick = Date.now();
      onTick(run);
    }
    await sleep(500);
  }
}

export function fmtCounts(c: RunCounts): string {
  return `total ${c.total}, queued ${c.queued}, succeeded ${c.succeeded}, failed ${c.failed}, uncertain ${c.uncertain}, invalid ${c.invalid}, skipped ${c.skipped}, superseded ${c.superseded}`;
}

/* ---------------------------------------------------------------- reading the simulator */

export interface SimDeal {
  id: string;
  name: string;
  created_at: string;
}

/**
 * Every deal of the simulator, paged directly (not through the proxy, so not counted) with
 * page_size=100. Faults apply to these GETs too: each page is retried (bounded).
 */
export async function readSimDeals(simPort: number): Promise<{ deals: SimDeal[]; pages: number; failedTries: number }> {
  const deals = new Map<string, SimDeal>();
  let failedTries = 0;
  let pages = 0;
  for (let page = 1; page <= 10_000; page++) {
    let got: SimDeal[] | undefined;
    for (let attempt = 0; attempt < 60 && !got; attempt++) {
      try {
        const r = await getJson(simPort, `/api/external/v2/deals?page_number=${page}&page_size=100`);
        if (r.status === 200) got = (r.body as { deals: SimDeal[] }).deals;
        else failedTries++;
      } catch {
        failedTries++;
      }
      if (!got) await sleep(50);
    }
    if (!got) throw new Error(`could not read deal page ${page} after 60 tries`);
    pages++;
    if (got.length === 0) break;
    for (const d of got) deals.set(d.id, { id: d.id, name: d.name, created_at: d.created_at });
  }
  return { deals: [...deals.values()], pages, failedTries };
}

function getJson(port: number, path: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'GET',
        headers: { host: `acme.localhost:${port}`, 'x-api-key': API_KEY, accept: 'application/json' },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
          } catch (e) {
            reject(e);
          }
        });
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** How the deals of the file's names came out: found, duplicated, missing, and what the results recorded. */
export interface DealAudit {
  dealsFound: number;
  distinctNames: number;
  duplicateNames: number;
  extraDeals: number;
  rowsWithoutDeal: number[];
  /** Rows whose stored result names a deal id that is not a deal of that row's name. */
  wrongRecordIds: number[];
  /** Succeeded rows with no record id. */
  succeededWithoutId: number[];
  resultKinds: Record<string, number>;
  examples: {
    duplicates: Array<{ name: string; ids: string[] }>;
    missing: Array<{ row: number; name: string; status: string; message?: string }>;
  };
}

export async function auditDeals(
  store: RunStore,
  runId: string,
  names: string[],
  deals: SimDeal[],
): Promise<DealAudit> {
  const wanted = new Set(names);
  const byName = new Map<string, string[]>();
  for (const d of deals) {
    if (!wanted.has(d.name)) continue;
    const list = byName.get(d.name) ?? [];
    list.push(d.id);
    byName.set(d.name, list);
  }
  let dealsFound = 0;
  let duplicateNames = 0;
  let extraDeals = 0;
  const duplicates: DealAudit['examples']['duplicates'] = [];
  for (const [name, ids] of byName) {
    dealsFound += ids.length;
    if (ids.length > 1) {
      duplicateNames++;
      extraDeals += ids.length - 1;
      if (duplicates.length < 5) duplicates.push({ name, ids });
    }
  }
  const resultKinds: Record<string, number> = {};
  const wrongRecordIds: number[] = [];
  const succeededWithoutId: number[] = [];
  const results = new Map<number, { status: string; recordId?: string; message?: string }>();
  for await (const r of store.iterateResults(runId)) {
    results.set(r.row, r);
    resultKinds[r.status] = (resultKinds[r.status] ?? 0) + 1;
    const name = names[r.row - 1];
    if (r.status === 'succeeded') {
      if (!r.recordId) succeededWithoutId.push(r.row);
      else if (name === undefined || !(byName.get(name) ?? []).includes(r.recordId)) wrongRecordIds.push(r.row);
    }
  }
  const rowsWithoutDeal: number[] = [];
  const missing: DealAudit['examples']['missing'] = [];
  names.forEach((name, i) => {
    if (byName.has(name)) return;
    rowsWithoutDeal.push(i + 1);
    const r = results.get(i + 1);
    if (missing.length < 5)
      missing.push({
        row: i + 1,
        name,
        status: r?.status ?? 'no result',
        ...(r?.message ? { message: r.message } : {}),
      });
  });
  return {
    dealsFound,
    distinctNames: byName.size,
    duplicateNames,
    extraDeals,
    rowsWithoutDeal,
    wrongRecordIds,
    succeededWithoutId,
    resultKinds,
    examples: { duplicates, missing },
  };
}

/* ---------------------------------------------------------------- worker logs */

/** Counts of the worker log lines that tell the create story, by message. */
export function logSummary(logFile: string): {
  byMsg: Record<string, number>;
  warnOrWorse: number;
  lines: number;
  samples: string[];
} {
  let text: string;
  try {
    text = readFileSync(logFile, 'utf8');
  } catch {
    return { byMsg: {}, warnOrWorse: 0, lines: 0, samples: [] };
  }
  const byMsg: Record<string, number> = {};
  let warnOrWorse = 0;
  let lines = 0;
  const samples: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    lines++;
    try {
      const j = JSON.parse(line) as { msg?: string; level?: number };
      const msg = j.msg ?? '?';
      byMsg[msg] = (byMsg[msg] ?? 0) + 1;
      if ((j.level ?? 0) >= 40) {
        warnOrWorse++;
        if (samples.length < 8) samples.push(line.length > 400 ? `${line.slice(0, 400)}…` : line);
      }
    } catch {
      byMsg['(not JSON)'] = (byMsg['(not JSON)'] ?? 0) + 1;
      if (samples.length < 8) samples.push(line.slice(0, 400));
    }
  }
  return { byMsg, warnOrWorse, lines, samples };
}

export function printLogSummary(logFile: string): void {
  const s = logSummary(logFile);
  console.log(`  worker log ${logFile}: ${s.lines} lines, ${s.warnOrWorse} at warn or above`);
  for (const [msg, n] of Object.entries(s.byMsg)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 20))
    console.log(`    ${String(n).padStart(6)}  ${msg}`);
  if (s.samples.length) {
    console.log('  warn/error samples:');
    for (const l of s.samples) console.log(`    ${l}`);
  }
}

/** A few failed/uncertain rows of a run with their messages, before a retry takes their results away. */
export async function printProblems(store: RunStore, runId: string, limit = 8): Promise<void> {
  const p = await store.problems(runId, { limit });
  if (p.total === 0) return;
  console.log(`  problem rows (${p.total}), first ${p.rows.length}:`);
  for (const r of p.rows)
    console.log(
      `    row ${r.row}: ${r.status}${r.code ? ` ${r.code}` : ''}${r.httpStatus ? ` HTTP ${r.httpStatus}` : ''}: ${r.message ?? ''}`,
    );
}
