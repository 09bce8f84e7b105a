import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { CrmSyncError } from '../errors/index.js';

export interface PrivateRedisOptions {
  /** TCP port. Default: a free one. */
  port?: number;
  /** Append-only persistence (survives a restart on the same dir). Default false. */
  appendOnly?: boolean;
  /** Data directory. Default: a new temp dir, removed on stop. */
  dir?: string;
  /** More `redis-server` arguments (e.g. `--cluster-enabled yes` for a test). Default none. */
  extraArgs?: string[];
}

export interface PrivateRedis {
  url: string;
  port: number;
  dir: string;
  /** Kill the server (SIGKILL when `hard`), keeping its dir for a restart. */
  kill(hard?: boolean): Promise<void>;
  /** Start it again on the same port and dir (after kill). */
  restart(): Promise<void>;
  /** Stop and remove the temp dir (when we made it). */
  stop(): Promise<void>;
}

export function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function redisAnswers(url: string, timeoutMs = 1000): Promise<boolean> {
  const r = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    connectTimeout: timeoutMs,
    retryStrategy: () => null,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

/** Starts a throwaway `redis-server` on loopback (for the demo and tests), or says how to get one. */
export async function startPrivateRedis(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  if (!hasRedisServer()) {
    throw new CrmSyncError(
      'REDIS_UNAVAILABLE',
      'no Redis answers on 127.0.0.1:6379 and redis-server is not installed. Install it (apt-get install redis-server, brew install redis) or set REDIS_URL.',
    );
  }
  const port = options.port ?? (await freePort());
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'crm-sync-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  const launch = async () => {
    child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        options.appendOnly ? 'yes' : 'no',
        '--appendfsync',
        'always',
        '--dir',
        dir,
        ...(options.extraArgs ?? []),
      ],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 100; i++) {
      if (await redisAnswers(url, 200)) return;
      await sleep(50);
    }
    // A server that never answered must not outlive us (it would keep the CLI alive).
    await kill(true);
    throw new CrmSyncError('REDIS_UNAVAILABLE', `private redis-server on port ${port} did not start`);
  };
  const kill = async (hard = false) => {
    const c = child as ChildProcess | null;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((resolve) => c.once('exit', resolve));
    c.kill(hard ? 'SIGKILL' : 'SIGTERM');
    await exited;
  };
  await launch();
  return {
    url,
    port,
    dir,
    kill,
    restart: launch,
    async stop() {
      await kill();
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** REDIS_URL if set; else 127.0.0.1:6379 if it answers; else a private redis-server. */
export async function findOrStartRedis(
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ url: string; started: PrivateRedis | null }> {
  if (env.REDIS_URL) return { url: env.REDIS_URL, started: null };
  const local = 'redis://127.0.0.1:6379';
  if (await redisAnswers(local)) return { url: local, started: null };
  const started = await startPrivateRedis();
  return { url: started.url, started };
}
