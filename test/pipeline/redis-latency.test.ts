import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { cancelRun } from '../../src/lifecycle/index.js';
import type { WorkerPool } from '../../src/worker/index.js';
import { busiestWindow, loopStallWatch } from '../helpers/busiest-window.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { testRedisAddress, testRedisUrlVia } from '../helpers/redis.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/*
 * Issue 42: Redis a network hop away. Every worker here reaches Redis through a TCP proxy that
 * delays every byte 10 ms each way (2–10 ms is across zones or through a TLS proxy); the
 * harness itself (producer, checks) reaches it directly. What must hold is what holds on
 * loopback: a run with a known limit completes at it, never over it; the write fence refuses a
 * stale worker and per-field order holds; a cancel stops the run at its next request.
 * Functional, not timed: speed is bench/redis-latency.ts's.
 */

const DELAY_MS = 10;
/** A job lock this short, so a worker cut from Redis loses its jobs within the test. */
const LOCK_MS = 2000;

let h: Harness | undefined;
const proxies: TcpProxy[] = [];
const pools: WorkerPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  await h?.close();
  h = undefined;
});

async function farRedis(): Promise<TcpProxy> {
  const { host, port } = testRedisAddress();
  const proxy = await startTcpProxy({ upstreamHost: host, upstreamPort: port, delayMs: DELAY_MS });
  proxies.push(proxy);
  return proxy;
}

/** A worker pool whose Redis is `proxy`'s (10 ms away each way). */
async function workerVia(harness: Harness, proxy: TcpProxy, concurrency: number, lockDurationMs?: number) {
  const pool = await harness.startWorkers({
    config: { ...harness.config, redisUrl: testRedisUrlVia(proxy.port) },
    concurrency,
    ...(lockDurationMs ? { lockDurationMs, closeTimeoutMs: 1000 } : {}),
  });
  pools.push(pool);
  return pool;
}

describe(`workers whose Redis is ${DELAY_MS} ms away each way`, () => {
  it('a 200-row run with a known limit of 50/s completes, 0 × 429, no 1 s window of requests over 50', async () => {
    // Before issue 42 this run sent nothing in 60 s at concurrency 4: every send time arrived a
    // half round trip after Redis granted it, was counted late, given back and granted again.
    h = await startHarness({
      records: 200,
      simRateLimit: { max: 50, windowMs: 1000 },
      knownRateLimit: { max: 50, durationMs: 1000 },
      crmProxy: true,
    });
    // The worker, both proxies and the simulator share this process's event loop: a stall of it
    // holds up a send past its grant (what docs/architecture.md says can still bunch after a token
    // is taken) and the arrival's stamp. Measured, so the window check allows exactly that.
    const loop = loopStallWatch();
    await workerVia(h, await farRedis(), 4);
    const rows = [...h.ws.deals.values()].map((d, i) => [d.id, `Far ${i}`]);
    const run = await h.importFile(h.file('far.csv', csv(['id', 'name'], rows)), 'deal.update');
    const done = await h.waitForRun(run.id, 120_000);
    const stallMs = loop.stop();
    expect(done.counts).toMatchObject({ total: 200, succeeded: 200, failed: 0 });
    expect(h.ws.stats.rateLimited).toBe(0);
    // Counted as the CRM counts them: when each arrived (crm-fault-proxy.ts, arrivedAt).
    const sent = h.proxy!.requests.filter((r) => r.forwardedAt !== null).map((r) => r.arrivedAt);
    expect(sent.length).toBeGreaterThanOrEqual(200);
    // The grants keep the 50th after another 1,000 ms + the margin (2 %: 20 ms, at least) away;
    // sends and stamps late by up to the longest stall (and a few ms of socket) can close that
    // much of it. On a quiet box (stalls under ~15 ms) this is the plain 1-s window; a grant over
    // the log still shows, as 51 within less than a second.
    const windowMs = Math.min(1000, 1000 + 20 - stallMs - 5);
    const busiest = busiestWindow(sent, windowMs);
    console.log(
      `[redis-latency] ${sent.length} requests; longest loop stall ${stallMs.toFixed(0)} ms; busiest ${windowMs.toFixed(0)}-ms window ${busiest}, busiest 1 s ${busiestWindow(sent, 1000)}`,
    );
    expect(busiest).toBeLessThanOrEqual(50);
  }, 150_000);

  it('a worker cut from Redis past its job lock, its held writes delivered late: the fence refuses them, every field ends at its last row', async () => {
    h = await startHarness({ records: 60, seed: 11, latencyMs: 20 });
    const deals = [...h.ws.deals.values()].slice(0, 60);
    const status = (i: number) => (['won', 'lost', 'in_progress'] as const)[i % 3]!;
    // Per deal: a value row, a status row, then a second value row (the value's last writer).
    const rows = [
      ...deals.map((d, i) => [d.id, d.name, 3000 + i, '']),
      ...deals.map((d, i) => [d.id, d.name, '', status(i)]),
      ...deals.map((d, i) => [d.id, d.name, 4000 + i, '']),
    ];
    const cut = await farRedis();
    await workerVia(h, cut, 4, LOCK_MS);
    const run = await h.importFile(h.file('partial.csv', csv(['id', 'name', 'value', 'status'], rows)), 'deal.update');
    await h.waitForRun(run.id, 30_000, (r) => r.counts.succeeded >= 8);
    cut.blackhole();
    // Worker 2, as far away, takes the waiting jobs at once and worker 1's once their locks expire.
    await workerVia(h, await farRedis(), 8, LOCK_MS);
    await sleep(3 * LOCK_MS);
    // What worker 1 sent meanwhile (fence calls, results, lock renewals) now reaches Redis late.
    cut.heal('deliver');
    const done = await h.waitForRun(run.id, 60_000);
    await sleep(500); // a late write of worker 1 would land now
    const stale = deals.filter((d, i) => {
      const now = h!.ws.deals.get(d.id);
      return now?.value !== 4000 + i || now.status !== status(i);
    });
    const results = await resultsByRow(h, run.id);
    expect(done.status).toBe('completed');
    expect(results.map((r) => r.row)).toEqual(Array.from({ length: 180 }, (_, i) => i + 1));
    expect(results.filter((r) => r.status === 'failed')).toEqual([]);
    expect(stale.map((d) => d.id)).toEqual([]);
    // The status rows (the only writers of status) and the last value rows were never dropped.
    for (const r of results.filter((x) => x.row > 60)) expect(r.status).toBe('succeeded');
  }, 120_000);

  it('a cancel stops the run at its next request: at most `concurrency` requests after it, every unsent row cancelled', async () => {
    const concurrency = 4;
    h = await startHarness({
      records: 200,
      knownRateLimit: { max: 10, durationMs: 1000 },
      // Counts the CRM's requests exactly: no list reads of before-values among them.
      workspace: { rowsPerJob: 10, readBefore: false },
    });
    const rows = [...h.ws.deals.values()].map((d) => [d.id, `Renamed ${d.id}`]);
    const run = await h.importFile(h.file('rename.csv', csv(['id', 'name'], rows)), 'deal.update');
    await workerVia(h, await farRedis(), concurrency);
    for (const until = Date.now() + 60_000; h.ws.stats.requests < 12; await sleep(20))
      if (Date.now() > until) throw new Error('the run did not start sending');
    await cancelRun({
      store: h.runtime.store,
      queueFor: (w) => h!.runtime.queue(w),
      runId: run.id,
      reason: 'stop now',
    });
    const atCancel = h.ws.stats.requests;
    const done = await h.waitForRun(run.id, 60_000, (r) => r.counts.queued === 0);
    await sleep(1500); // nothing trickles in later either
    expect(h.ws.stats.requests - atCancel).toBeLessThanOrEqual(concurrency);
    expect(done.status).toBe('cancelled');
    const results = await resultsByRow(h, run.id);
    expect(results).toHaveLength(200);
    const sent = results.filter((r) => r.status === 'succeeded').length;
    expect(done.counts).toMatchObject({ total: 200, queued: 0, succeeded: sent, cancelled: 200 - sent });
    expect(h.ws.stats.requests).toBe(sent);
  }, 120_000);
});
