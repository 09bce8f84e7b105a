import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { requestBudgetKey } from '../../src/keys/index.js';
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
/** Send-log watches still reading (watchSendLog), stopped whatever a test's end. */
const watches: Array<() => void> = [];
afterEach(async () => {
  watches.splice(0).forEach((stop) => stop());
  await Promise.all(pools.splice(0).map((p) => p.close()));
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  await h?.close();
  h = undefined;
});

async function farRedis(delayMs = DELAY_MS): Promise<TcpProxy> {
  const { host, port } = testRedisAddress();
  const proxy = await startTcpProxy({ upstreamHost: host, upstreamPort: port, delayMs });
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

  it("a create's place in the send log is when its POST left, a fence call after its token, not its grant", async () => {
    // A create takes its token before the fence's call (beginCreate), so with Redis 10 ms away
    // its POST leaves a round trip (20 ms and more) after the send time it was granted. The log's
    // windows count from the real send (TokenWait.sent, as an update's): else a create held up
    // longer than the next is counted early, and `max` later grants bunch against it. At 10/s
    // the grants are 100 ms apart, so no other grant passes for a POST's own. Redis is 20 ms away
    // here: a send is noted only past a quarter of the margin, and on a loaded box the margin
    // widens to a tenth of the window (25 ms then: a CI run's 10-ms creates, 21–23 ms late, were
    // left where the margin covers them); a fence round trip of 40 ms is past it however wide.
    h = await startHarness({ knownRateLimit: { max: 10, durationMs: 1000 }, crmProxy: true });
    const rows = Array.from({ length: 20 }, (_, i) => [`Far create ${i}`, 100 + i]);
    const log = watchSendLog(h);
    const run = await h.importFile(h.file('creates.csv', csv(['name', 'value'], rows)), 'deal.create');
    await workerVia(h, await farRedis(2 * DELAY_MS), 4);
    const done = await h.waitForRun(run.id, 60_000);
    expect(done.counts).toMatchObject({ total: 20, succeeded: 20 });
    const posts = h.proxy!.requests.filter((r) => r.method === 'POST' && r.forwardedAt !== null);
    expect(posts).toHaveLength(20);
    // The log keeps the last `max` grants: the last 10 POSTs each have theirs.
    const gaps = await log.gaps(posts.slice(-10).map((r) => r.arrivedAt));
    console.log(
      `[redis-latency] creates: |arrival − nearest send-log entry|, ms: ${gaps.map((g) => g.toFixed(1)).join(' ')}`,
    );
    // Entries at the grants would leave each a fence round trip (≥ 40 ms) or more from its POST.
    expect(gaps[8]!).toBeLessThan(8);

    // An invite batch's token comes before its job-lock check: the same holds for its POST.
    const emails = Array.from({ length: 6 }, (_, i) => [`far.member${i}@invites.example`]);
    const file = h.file('invites.csv', csv(['email'], emails));
    const invites = await h.importFile(file, 'team.invite', { inviteBatchSize: 1 });
    expect((await h.waitForRun(invites.id, 60_000)).counts).toMatchObject({ total: 6, succeeded: 6 });
    const invited = h.proxy!.requests.filter((r) => /team-members/.test(r.path)).map((r) => r.arrivedAt);
    expect(invited).toHaveLength(6);
    const inviteGaps = await log.gaps(invited);
    log.stop();
    console.log(`[redis-latency] invites: ${inviteGaps.map((g) => g.toFixed(1)).join(' ')} ms`);
    expect(inviteGaps[4]!).toBeLessThan(8);
  }, 90_000);

  it('a create that sends no POST on its token gives the send time back: an identical create waiting its turn', async () => {
    h = await startHarness({ knownRateLimit: { max: 10, durationMs: 1000 }, crmProxy: true });
    // The first POST is applied at once and its answer held: the identical row's fingerprint is
    // held meanwhile (beginCreate: wait), and the row comes back for it later.
    h.proxy!.setRules([{ method: 'POST', path: /\/deals$/, holdAnswer: 600, times: 1 }]);
    const run = await h.importFile(
      h.file(
        'twins.csv',
        csv(
          ['name', 'value'],
          [
            ['Twin', 5],
            ['Twin', 5],
          ],
        ),
      ),
      'deal.create',
    );
    await workerVia(h, await farRedis(), 2);
    for (const until = Date.now() + 30_000; h.proxy!.requests.length === 0; await sleep(5))
      if (Date.now() > until) throw new Error('no create was sent');
    // The twin had its token 100 ms after the first's (10/s) and its fence's answer a round trip
    // later; its wait's token is back (RELEASE) well before the first's answer comes.
    await sleep(400);
    const first = h.proxy!.requests.map((r) => r.arrivedAt);
    expect(first).toHaveLength(1);
    const log = await sendLog(h);
    console.log(
      `[redis-latency] twins: send log ${log.map((e) => (e - first[0]!).toFixed(1)).join(' ')} ms from the first POST`,
    );
    // The log holds the request the CRM saw, not the twin's unused grant beside it.
    expect(log.filter((e) => Math.abs(e - first[0]!) > 8)).toEqual([]);
    const done = await h.waitForRun(run.id, 60_000);
    expect(done.counts).toMatchObject({ total: 2, succeeded: 2 });
    const posts = h.proxy!.requests.filter((r) => r.method === 'POST').map((r) => r.arrivedAt);
    expect(posts).toHaveLength(2);
    expect(h.proxy!.unspent()).toBe(0);
    // The twin went only after the first's answer: it waited on the fingerprint.
    expect(posts[1]! - posts[0]!).toBeGreaterThanOrEqual(600);
  }, 90_000);
});

/**
 * The workspace's send log as it goes, every entry it held at some moment (read every 20 ms):
 * the log keeps only the last `max` grants and expires a second after its last, so a read once
 * the run has ended can find it gone on a loaded box. `gaps`: how far each of `arrivals` lies
 * from its nearest entry (ms, ascending). A late send's note (NOTE_LATE) goes after its request,
 * one call at a time through the far Redis, so it waits up to 3 s for the last few to land.
 */
function watchSendLog(harness: Harness): { gaps(arrivals: readonly number[]): Promise<number[]>; stop(): void } {
  const seen = new Set<number>();
  const read = async () => (await sendLog(harness)).forEach((e) => seen.add(e));
  const timer = setInterval(() => void read().catch(() => undefined), 20);
  watches.push(() => clearInterval(timer));
  const gapsNow = (arrivals: readonly number[]) =>
    arrivals.map((at) => Math.min(...[...seen].map((e) => Math.abs(at - e)))).sort((a, b) => a - b);
  return {
    async gaps(arrivals) {
      for (const until = Date.now() + 3000; ; await sleep(50)) {
        await read();
        const gaps = gapsNow(arrivals);
        if (gaps.every((g) => g < 8) || Date.now() > until) return gaps;
      }
    },
    stop: () => clearInterval(timer),
  };
}

/** The workspace's known-limit send log (rate/token-bucket.ts), oldest first, Redis's clock (ms). */
async function sendLog(harness: Harness): Promise<number[]> {
  const key = `${requestBudgetKey(harness.config.prefix, 'acme')}:log`;
  return (await harness.runtime.redis.lrange(key, 0, -1)).map(Number).sort((a, b) => a - b);
}
