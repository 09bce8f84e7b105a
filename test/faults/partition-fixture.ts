import type { Config } from '../../src/config/index.js';
import { silentLogger, type Logger } from '../../src/log/index.js';
import type { RunRecord } from '../../src/runs/index.js';
import { startWorkerPool, type WorkerPool } from '../../src/worker/index.js';
import { resultsByRow, type Harness } from '../helpers/pipeline.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { testRedisAddress, testRedisUrlVia } from '../helpers/redis.js';

/*
 * What the partition files share (partition.test.ts, partition-half-open.test.ts): a TCP proxy
 * per Redis link that blackholes, resets or leaves sockets hung, and the worker behind it.
 * Scaled down: a 2 s job lock instead of 30 s.
 */

export const LOCK_MS = 2000;

export function viaProxy(config: Config, proxy: TcpProxy): Config {
  return { ...config, redisUrl: testRedisUrlVia(proxy.port) };
}

/** Worker 1: a pool whose Redis link goes through the proxy (the one the tests cut). */
export function workerBehind(h: Harness, proxy: TcpProxy, logger: Logger = silentLogger): Promise<WorkerPool> {
  return startWorkerPool({
    config: viaProxy(h.config, proxy),
    logger,
    concurrency: 4,
    lockDurationMs: LOCK_MS,
    closeTimeoutMs: 1000,
  });
}

export async function redisProxy(): Promise<TcpProxy> {
  const { host, port } = testRedisAddress();
  return startTcpProxy({ upstreamHost: host, upstreamPort: port });
}

export async function summary(h: Harness, label: string, run: RunRecord, extra: Record<string, number>) {
  const results = await resultsByRow(h, run.id);
  const kinds: Record<string, number> = {};
  for (const r of results) kinds[r.status] = (kinds[r.status] ?? 0) + 1;
  console.log(
    `[partition] ${label}: rows ${run.counts.total}, results ${JSON.stringify(kinds)}, ${Object.entries(extra)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  return { results, kinds };
}
