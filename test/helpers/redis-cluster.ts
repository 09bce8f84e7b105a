import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A private Redis Cluster on 127.0.0.1: `masters` masters, each with `replicas` replicas. */
export interface LocalRedisCluster {
  /** Seed nodes as REDIS_CLUSTER_NODES wants them: `127.0.0.1:p1,127.0.0.1:p2,…`. */
  nodes: string;
  ports: number[];
  /** The ports of the current masters and the number of keys each holds. */
  masters(): Promise<Array<{ port: number; keys: number }>>;
  /** kill -9 the node on `port` (it stays dead). */
  kill(port: number): void;
  /** Waits until every live node says cluster_state:ok and `port` is no longer a master. */
  waitForFailover(port: number, timeoutMs?: number): Promise<number>;
  /** Total commands processed by the masters (INFO stats), per master port. */
  commandsByMaster(): Promise<Map<number, number>>;
  close(): Promise<void>;
}

export interface LocalRedisClusterOptions {
  /** Default 3. */
  masters?: number;
  /** Replicas of each master. Default 1. */
  replicas?: number;
  /** cluster-node-timeout (ms): how long a dead master takes to be failed over. Default 2000. */
  nodeTimeoutMs?: number;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Ports p with p + 10000 free as well (the cluster bus port). */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port > 55_000 || taken.has(port)) continue;
    const bus = createServer();
    const busFree = await new Promise<boolean>((resolve) => {
      bus.once('error', () => resolve(false));
      bus.listen(port + 10_000, '127.0.0.1', () => bus.close(() => resolve(true)));
    });
    if (busFree) return port;
  }
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 10_000 });
  return stdout;
}

/**
 * Starts `masters × (1 + replicas)` redis-server processes in cluster mode (AOF on, nothing else
 * on disk outside a temp dir) and joins them with `redis-cli --cluster create`. Loopback only;
 * `close()` kills them and removes the dir. Needs redis-server and redis-cli on PATH.
 */
export async function startLocalRedisCluster(options: LocalRedisClusterOptions = {}): Promise<LocalRedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 1;
  const dir = mkdtempSync(join(tmpdir(), 'crm-sync-cluster-'));
  const taken = new Set<number>();
  const ports: number[] = [];
  for (let i = 0; i < masters * (1 + replicas); i++) {
    const port = await clusterPort(taken);
    taken.add(port);
    ports.push(port);
  }
  const children = new Map<number, ChildProcess>();
  for (const port of ports) {
    const child = spawn(
      'redis-server',
      [
        '--port', String(port),
        '--bind', '127.0.0.1',
        '--cluster-enabled', 'yes',
        '--cluster-config-file', `nodes-${port}.conf`,
        '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 2000),
        '--appendonly', 'yes',
        '--appendfilename', `aof-${port}.aof`,
        '--appenddirname', `aof-${port}`,
        '--save', '',
        '--dir', dir,
        '--maxmemory-policy', 'noeviction',
      ], // prettier-ignore
      { stdio: 'ignore' },
    );
    children.set(port, child);
  }
  const close = async (): Promise<void> => {
    for (const child of children.values()) if (child.exitCode === null) child.kill('SIGKILL');
    await sleep(100);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) {
      for (let i = 0; ; i++) {
        if ((await cli(port, 'PING').catch(() => '')).trim() === 'PONG') break;
        if (i > 100) throw new Error(`redis-server on ${port} did not start`);
        await sleep(50);
      }
    }
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { timeout: 30_000 },
    );
    await waitFor(async () => {
      for (const port of ports) if (!(await cli(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok')) return false;
      // Every replica attached to its master (a failover needs one).
      const info = await cli(ports[0]!, 'CLUSTER', 'NODES');
      return (
        info.split('\n').filter((l) => l.includes('slave') && l.includes('connected')).length >= masters * replicas
      );
    }, 30_000);
  } catch (err) {
    await close();
    throw err;
  }

  const alive = () => ports.filter((p) => children.get(p)?.exitCode === null && children.get(p)?.signalCode === null);
  const masterPorts = async (): Promise<number[]> => {
    const nodes = await cli(alive()[0]!, 'CLUSTER', 'NODES');
    return nodes
      .split('\n')
      .filter((l) => / master /.test(` ${l.split(' ')[2]?.replace(/,/g, ' ')} `) && !l.includes('fail'))
      .map((l) => Number(/:(\d+)@/.exec(l)?.[1]))
      .filter((p) => Number.isFinite(p));
  };

  return {
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    ports,
    async masters() {
      const out: Array<{ port: number; keys: number }> = [];
      for (const port of await masterPorts()) out.push({ port, keys: Number((await cli(port, 'DBSIZE')).trim()) });
      return out;
    },
    kill(port) {
      children.get(port)?.kill('SIGKILL');
    },
    async waitForFailover(port, timeoutMs = 30_000) {
      const started = Date.now();
      await waitFor(async () => {
        if ((await masterPorts()).includes(port)) return false;
        for (const p of alive()) if (!(await cli(p, 'CLUSTER', 'INFO')).includes('cluster_state:ok')) return false;
        return true;
      }, timeoutMs);
      return Date.now() - started;
    },
    async commandsByMaster() {
      const out = new Map<number, number>();
      for (const port of await masterPorts()) {
        const info = await cli(port, 'INFO', 'stats');
        out.set(port, Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0));
      }
      return out;
    },
    close,
  };
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`the local Redis Cluster did not settle in ${timeoutMs} ms`);
    await sleep(100);
  }
}
