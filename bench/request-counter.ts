import { spawn } from 'node:child_process';
import { createServer, get, request, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setPriority } from 'node:os';

/** One request as the CRM's front door saw it: when it arrived (epoch ms, sub-ms) and its answer. */
export interface Arrival {
  at: number;
  status: number;
  /** The request's method (GET: a list page; writes are POST/PATCH/PUT/DELETE). */
  method: string;
}

/**
 * A loopback HTTP proxy in front of the simulator that notes when each request arrives and how
 * it was answered: what a CRM that meters requests would count, independent of the workers'
 * own counters. It runs in a process of its own, so the benchmark's own work (reading the
 * file, queueing rows) cannot delay its time stamps and bunch them up.
 */
export interface RequestCounter {
  port: number;
  /** `normal`, or `raised (nice -15)` where the counter could be put above the box's other work. */
  priority: string;
  /** The workspace's base URL through the proxy. */
  baseUrlOf(workspace: string): string;
  /** The arrivals from the `from`-th on (GET /__arrivals, which is not counted). */
  arrivals(from?: number): Promise<Arrival[]>;
  close(): Promise<void>;
}

export async function startRequestCounter(upstreamPort: number): Promise<RequestCounter> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', new URL(import.meta.url).pathname, 'serve', String(upstreamPort)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  process.on('exit', () => child.kill('SIGKILL'));
  // The CRM's front door is not on the worker's box: on a loaded one (BENCH_BUSY) a counter
  // scheduled like the rest would stamp requests late and bunch them up. Above normal priority
  // when allowed (root); as is otherwise, and the run says which.
  let priority = 'normal';
  try {
    if (child.pid !== undefined) setPriority(child.pid, -15);
    priority = 'raised (nice -15)';
  } catch {
    // Not allowed (not root): the counter shares the box's scheduling.
  }
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`request counter exited ${code}`)));
    child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
  });
  return {
    port,
    priority,
    baseUrlOf: (ws) => `http://${ws}.localhost:${port}/api/external`,
    arrivals: (from = 0) =>
      new Promise((resolve, reject) => {
        get({ host: '127.0.0.1', port, path: `/__arrivals?from=${from}` }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve(JSON.parse(body) as Arrival[]));
        }).on('error', reject);
      }),
    async close() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/** The proxy itself (the child process). */
async function serve(upstreamPort: number): Promise<void> {
  const arrivals: Arrival[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const server: Server = createServer((req, res) => {
    const at = performance.timeOrigin + performance.now();
    if (req.url?.startsWith('/__arrivals')) {
      const from = Number(new URL(req.url, 'http://x').searchParams.get('from') ?? 0);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(arrivals.slice(from)));
      return;
    }
    const up = request(
      { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers: req.headers, agent },
      (answer) => {
        arrivals.push({ at, status: answer.statusCode ?? 0, method: req.method ?? '' });
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    up.on('error', () => {
      arrivals.push({ at, status: 502, method: req.method ?? '' });
      res.writeHead(502).end();
    });
    req.pipe(up);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
  process.once('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
    agent.destroy();
  });
}

if (process.argv[2] === 'serve' && process.argv[1] === new URL(import.meta.url).pathname)
  await serve(Number(process.argv[3]));

export { busiestWindow, tightestSpan } from '../test/helpers/busiest-window.js';

/**
 * The first moment (ms after `start`) at which the requests answered 2xx within the preceding
 * `windowMs` reach `target`; undefined if they never do.
 */
export function timeToRate(
  arrivals: readonly Arrival[],
  start: number,
  target: number,
  windowMs = 1000,
): number | undefined {
  const ok = arrivals
    .filter((a) => a.status >= 200 && a.status < 300)
    .map((a) => a.at)
    .sort((a, b) => a - b);
  for (let i = 0, j = 0; i < ok.length; i++) {
    while (ok[i]! - ok[j]! >= windowMs) j++;
    if (i - j + 1 >= target) return ok[i]! - start;
  }
  return undefined;
}
