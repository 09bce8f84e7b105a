import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/index.js';
import { silentLogger, type Logger } from '../../src/log/index.js';
import { importFile } from '../../src/lifecycle/index.js';
import { workspaceRequestBudget } from '../../src/rate/index.js';
import type { RunRecord } from '../../src/runs/index.js';
import { createCrmClient, openRuntime } from '../../src/runtime/index.js';
import { verifyRun } from '../../src/reconcile/index.js';
import { reconcile } from '../reconcile/fixtures.js';
import { startWorkerPool, type WorkerPool } from '../../src/worker/index.js';
import { expectOwnDealsOnly } from '../chaos/chaos-check.js';
import { captureLogger } from '../helpers/log-capture.js';
import {
  calibrateRecordClock,
  csv,
  FAULTED_POST_LATENCY,
  resultsByRow,
  startHarness,
  type Harness,
  dealValuesFile,
} from '../helpers/pipeline.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { testRedisAddress, testRedisUrlVia } from '../helpers/redis.js';
import { harnessArgs, startCli } from '../helpers/run-cli.js';

/*
 * Network partitions between a worker and Redis (a TCP proxy per link that blackholes, resets
 * or leaves sockets hung), scaled down: a 2 s job lock instead of 30 s. What must hold: one
 * result per row, every record at its last row's value, no duplicate deals, results never
 * rewritten by a stale worker, and every process recovers or stops within a bound.
 */

const LOCK_MS = 2000;

function viaProxy(config: Config, proxy: TcpProxy): Config {
  return { ...config, redisUrl: testRedisUrlVia(proxy.port) };
}

/** Worker 1: a pool whose Redis link goes through the proxy (the one the tests cut). */
function workerBehind(h: Harness, proxy: TcpProxy, logger: Logger = silentLogger): Promise<WorkerPool> {
  return startWorkerPool({
    config: viaProxy(h.config, proxy),
    logger,
    concurrency: 4,
    lockDurationMs: LOCK_MS,
    closeTimeoutMs: 1000,
  });
}

async function redisProxy(): Promise<TcpProxy> {
  const { host, port } = testRedisAddress();
  return startTcpProxy({ upstreamHost: host, upstreamPort: port });
}

async function summary(h: Harness, label: string, run: RunRecord, extra: Record<string, number>) {
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

describe('a worker cut from Redis past its job lock', () => {
  let h: Harness;
  let proxy: TcpProxy;
  const pools: WorkerPool[] = [];
  beforeAll(async () => {
    h = await startHarness({ records: 60, seed: 11, latencyMs: 60 });
  });
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.close()));
    await proxy?.close();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("(a) a file that updates each deal twice: every deal ends at its last row's value, one result per row", async () => {
    proxy = await redisProxy();
    const deals = [...h.ws.deals.values()].slice(0, 60);
    const rows = [...deals.map((d, i) => [d.id, d.name, 1000 + i]), ...deals.map((d, i) => [d.id, d.name, 2000 + i])];
    const file = h.file('twice.csv', csv(['id', 'name', 'value'], rows));
    // Worker 1 alone, through the proxy; cut once it is well into the first half of the file.
    const worker1 = captureLogger('info');
    pools.push(await workerBehind(h, proxy, worker1.logger));
    const run = await h.importFile(file, 'deal.update');
    await h.waitForRun(run.id, 20_000, (r) => r.counts.succeeded >= 8);
    proxy.blackhole();
    const writesAtCut = h.ws.stats.writes.dealUpdate;
    // Worker 2 takes the waiting jobs at once, and worker 1's once their locks run out.
    pools.push(await h.startWorkers({ concurrency: 8, lockDurationMs: LOCK_MS }));
    await sleep(3 * LOCK_MS);
    proxy.heal('reset');
    const done = await h.waitForRun(run.id, 30_000);
    await sleep(500); // a late write of worker 1 would land now
    const stale = deals.filter((d, i) => h.ws.deals.get(d.id)?.value !== 2000 + i).length;
    const { results, kinds } = await summary(h, '(a) twice-updated file, worker 1 cut 6 s (lock 2 s)', done, {
      'writes at the CRM': h.ws.stats.writes.dealUpdate,
      'writes at the cut': writesAtCut,
      'deals at a stale value': stale,
    });
    expect(done.status).toBe('completed');
    expect(results.map((r) => r.row)).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    expect(kinds.failed ?? 0).toBe(0);
    expect(stale).toBe(0);
    // Every second-half row (the last for its deal) was applied, never superseded.
    for (const r of results.filter((x) => x.row > 60)) expect(r.status).toBe('succeeded');
    // Worker 1 said, job by job, that it lost their locks and what becomes of their rows.
    const lost = worker1.lines.filter((l) => l.level === 40 && /lost the lock of a job/.test(l.msg));
    expect(lost.length).toBeGreaterThan(0);
    expect(lost[0]).toMatchObject({
      jobId: expect.any(String),
      why: expect.stringMatching(/no lock renewal confirmed/),
    });
    expect(lost[0]!.msg).toMatch(/unsent rows are left to the worker that takes the job over/);
  }, 60_000);

  it('(a2) rows that fill different fields, worker 1 cut: every deal ends with each field at its last row, none stale', async () => {
    proxy = await redisProxy();
    const deals = [...h.ws.deals.values()].slice(0, 60);
    const status = (i: number) => (['won', 'lost', 'in_progress'] as const)[i % 3]!;
    // Per deal: a value row, a status row, then a second value row (the value's last writer).
    const rows = [
      ...deals.map((d, i) => [d.id, d.name, 3000 + i, '']),
      ...deals.map((d, i) => [d.id, d.name, '', status(i)]),
      ...deals.map((d, i) => [d.id, d.name, 4000 + i, '']),
    ];
    const file = h.file('partial.csv', csv(['id', 'name', 'value', 'status'], rows));
    pools.push(await workerBehind(h, proxy));
    const run = await h.importFile(file, 'deal.update');
    await h.waitForRun(run.id, 20_000, (r) => r.counts.succeeded >= 8);
    proxy.blackhole();
    pools.push(await h.startWorkers({ concurrency: 8, lockDurationMs: LOCK_MS }));
    await sleep(3 * LOCK_MS);
    proxy.heal('reset');
    const done = await h.waitForRun(run.id, 30_000);
    await sleep(500); // a late write of worker 1 would land now
    const stale = deals.filter((d, i) => {
      const now = h.ws.deals.get(d.id);
      return now?.value !== 4000 + i || now.status !== status(i);
    }).length;
    const { results, kinds } = await summary(h, '(a2) partial rows, worker 1 cut 6 s (lock 2 s)', done, {
      'deals with a stale field': stale,
    });
    expect(done.status).toBe('completed');
    expect(results).toHaveLength(180);
    expect(kinds.failed ?? 0).toBe(0);
    expect(stale).toBe(0);
    // The status rows (the only writers of status) and the last value rows were never dropped.
    for (const r of results.filter((x) => x.row > 60)) expect(r.status).toBe('succeeded');
  }, 60_000);

  it('(b) creates with a stale worker healed after the run completed: no duplicate deal, no result rewritten', async () => {
    proxy = await redisProxy();
    h.sim.setLatency(150);
    const file = h.file(
      'creates.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: 40 }, (_, i) => [`Partition deal ${i}`, i]),
      ),
    );
    pools.push(await workerBehind(h, proxy));
    const run = await h.importFile(file, 'deal.create');
    await h.waitForRun(run.id, 20_000, (r) => r.counts.succeeded >= 4);
    proxy.blackhole(); // worker 1 has creates on the wire: the CRM applies them, their answers wait
    pools.push(await h.startWorkers({ concurrency: 8, lockDurationMs: LOCK_MS }));
    const done = await h.waitForRun(run.id, 40_000);
    const before = await resultsByRow(h, run.id);
    proxy.heal('deliver'); // worker 1's held commands reach Redis late, as TCP would deliver them
    await sleep(3000);
    const after = await resultsByRow(h, run.id);
    const made = [...h.ws.deals.values()].filter((d) => d.name.startsWith('Partition deal '));
    const ids = after.map((r) => r.recordId).filter((id) => id !== undefined);
    await summary(h, '(b) creates, stale worker healed after completion', done, {
      deals: made.length,
      'duplicate deals': made.length - new Set(made.map((d) => d.name)).size,
      'ids shared': ids.length - new Set(ids).size,
    });
    expect(done.counts).toMatchObject({ total: 40, queued: 0 });
    expect(made.length).toBe(40);
    // Each row on its own deal, or (a lost answer stamped too close to its send) uncertain over it.
    expectOwnDealsOnly(h, after, (row) => `Partition deal ${row - 1}`);
    expect(after).toEqual(before);
  }, 70_000);
});

describe('a worker whose Redis link is left half-open', () => {
  let h: Harness;
  let proxy: TcpProxy;
  beforeAll(async () => {
    h = await startHarness({ records: 200, seed: 12, latencyMs: 30 });
    proxy = await redisProxy();
  });
  afterAll(async () => {
    await proxy?.close();
    await h?.close();
  });

  it('(c) a worker and a producer behind a half-open link notice the dead connection, reconnect and finish within a bound', async () => {
    const pool = await workerBehind(h, proxy);
    try {
      const deals = [...h.ws.deals.values()];
      const file = dealValuesFile(h, 'half-open.csv', 5000, deals);
      const run = await h.importFile(file, 'deal.update');
      await h.waitForRun(run.id, 20_000, (r) => r.counts.succeeded >= 20);
      proxy.blackhole();
      await sleep(200);
      const atCut = (await h.runtime.store.requireRun(run.id)).counts.succeeded;
      proxy.heal('hang'); // old sockets stay open and silent; new connections pass
      const started = Date.now();
      const done = await h.waitForRun(run.id, 45_000);
      await summary(h, '(c) worker behind a half-open link', done, {
        'succeeded at the cut': atCut,
        'seconds to finish after the cut': Math.round((Date.now() - started) / 1000),
      });
      expect(atCut).toBeLessThan(200); // the cut came mid-run: the rest went over a new connection
      expect(done.counts).toMatchObject({ total: 200, succeeded: 200 });
    } finally {
      await pool.close();
    }
    // A producer whose connection goes half-open mid-file: its watchdog reconnects and it goes on.
    const direct = await h.startWorkers({ concurrency: 8 }); // drains the queue, so the producer keeps producing
    const producer = await openRuntime(viaProxy(h.config, proxy), silentLogger);
    try {
      const rows = Array.from({ length: 1500 }, (_, i) => [`x${i}`, `n${i}`, i]);
      const big = h.file('producer.csv', csv(['id', 'name', 'value'], rows));
      let runId: string | undefined;
      const produced = importFile({
        file: big,
        op: 'deal.update',
        workspace: 'acme',
        queue: producer.queue('acme'),
        store: producer.store,
        highWaterMark: 100,
        chunkSize: 50,
        onRun: (r) => (runId = r.id),
      });
      await sleep(300);
      proxy.blackhole();
      await sleep(200);
      proxy.heal('hang');
      const started = Date.now();
      const readAtCut = runId ? (await h.runtime.store.requireRun(runId)).counts.total : 0;
      // The bound is on noticing the dead socket (watchdog ~5 s, command timeout 15 s), read from
      // Redis directly: the first rows queued after the cut. How long the rest takes is the
      // workers' pace on a loaded machine, bounded only loosely.
      let resumedMs: number | undefined;
      while (resumedMs === undefined && Date.now() - started < 30_000) {
        const total = runId ? (await h.runtime.store.requireRun(runId)).counts.total : 0;
        if (total > readAtCut) resumedMs = Date.now() - started;
        else await sleep(100);
      }
      if (resumedMs === undefined) throw new Error('the producer behind the half-open link queued nothing for 30 s');
      const bounded = await Promise.race([produced, sleep(90_000).then(() => 'stuck' as const)]);
      if (bounded === 'stuck') throw new Error('the producer behind the half-open link did not finish within 90 s');
      const { run } = bounded;
      console.log(
        `[partition] (c) producer behind a half-open link: ${readAtCut} rows read at the cut, queuing again ${(resumedMs / 1000).toFixed(1)} s after it, file read to the end ${Math.round((Date.now() - started) / 1000)} s after it, ${run.counts.total} rows`,
      );
      expect(run).toMatchObject({ producerDone: true, counts: { total: 1500 } });
    } finally {
      proxy.heal('reset');
      await producer.close();
      await direct.close();
    }
  }, 200_000);
});

describe('a worker cut from the CRM, with a known rate limit', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      records: 5,
      seed: 14,
      crmProxy: true,
      createSettleMs: 300,
      requestTimeoutMs: 1000,
      simRateLimit: { max: 20, windowMs: 1000 },
      knownRateLimit: { max: 20, durationMs: 1000 },
      retry: { attempts: 10, backoffMs: 50 },
    });
    await h.startWorkers({ concurrency: 4 });
    // Lost answers are told from a person's earlier deals on the calibrated record clock.
    await calibrateRecordClock(h);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('(e) lost answers send creates looking for their deals, and every list page spends the shared budget: 0 × 429', async () => {
    // Half the creates are applied and their answers lost: each of those rows pages the deal list.
    h.proxy!.setRules([
      { method: 'POST', path: /\/v2\/deals$/, applyAndDrop: true, times: 15, ...FAULTED_POST_LATENCY },
    ]);
    const file = h.file(
      'cut.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: 30 }, (_, i) => [`Budget deal ${i}`, i]),
      ),
    );
    const run = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 60_000);
    const made = [...h.ws.deals.values()].filter((d) => d.name.startsWith('Budget deal '));
    const pages = h.proxy!.count('GET', /\/deals$/);
    await summary(h, '(e) creates with lost answers under a known 20/s limit', run, {
      deals: made.length,
      'list pages': pages,
      '429s': h.ws.stats.rateLimited,
    });
    expect(run.counts).toMatchObject({ total: 30, succeeded: 30 });
    expect(made.length).toBe(30);
    expect(pages).toBeGreaterThan(0);
    expect(h.ws.stats.rateLimited).toBe(0);
  }, 70_000);

  it("(e) reconcile's and verify's list pages beside workers sending at the limit take the same budget: 0 × 429", async () => {
    h.proxy!.setRules([]);
    const limited = h.ws.stats.rateLimited;
    const creates = h.file(
      'busy.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: 100 }, (_, i) => [`Busy deal ${i}`, i]),
      ),
    );
    const busy = await h.importFile(creates, 'deal.create');
    await h.waitForRun(busy.id, 30_000, (r) => r.counts.succeeded >= 10);
    // Two records a page: the index pages tens of times while the workers send at 20/s.
    const budget = workspaceRequestBudget(h.runtime.redis, h.config, 'acme');
    const ids = [...h.ws.deals.values()].slice(0, 5).map((d) => [d.id, d.name]);
    const planned = await reconcile(h, h.file('plan.csv', csv(['id', 'name'], ids)), {
      op: 'deal.update',
      matchKey: 'id',
      pageSize: 2,
      budget,
    });
    const client = createCrmClient(h.config, 'acme', silentLogger);
    let verified;
    try {
      verified = await verifyRun({ runId: busy.id, store: h.runtime.store, client, pageSize: 2, budget });
    } finally {
      client.close();
    }
    const done = await h.waitForRun(busy.id, 30_000);
    await summary(h, '(e) reconcile and verify paging beside a run at the limit', done, {
      'reconcile pages': planned.index.pages,
      'verify pages': verified.listPages,
      '429s': h.ws.stats.rateLimited - limited,
    });
    expect(planned.index.pages).toBeGreaterThan(10);
    expect(done.counts).toMatchObject({ total: 100, succeeded: 100 });
    expect(h.ws.stats.rateLimited - limited).toBe(0);
  }, 90_000);
});

describe('SIGTERM during a partition', () => {
  let h: Harness;
  let proxy: TcpProxy;
  beforeAll(async () => {
    h = await startHarness({ records: 40, seed: 13, latencyMs: 400 });
    proxy = await redisProxy();
  });
  afterAll(async () => {
    await proxy?.close();
    await h?.close();
  });

  // Every state a Redis link can be in when the signal comes: nothing passes (blackholed),
  // connections are refused and reset, or the old sockets hang open while new ones would pass.
  const cuts: Array<[string, (p: TcpProxy) => Promise<void> | void]> = [
    ['blackholed', (p) => p.blackhole()],
    [
      'refused',
      async (p) => {
        p.reset();
        await p.refuse();
      },
    ],
    [
      'half-open',
      (p) => {
        p.blackhole();
        p.heal('hang');
      },
    ],
  ];
  it.each(cuts)(
    '(d) a busy worker whose Redis link is %s exits within its close timeout plus 5 s',
    async (state, cut) => {
      const env = { ...h.env, REDIS_URL: testRedisUrlVia(proxy.port) };
      const { args } = harnessArgs(h, ['worker', '--close-timeout-ms', '2000', '--lock-ms', String(LOCK_MS)]);
      const cli = startCli(args, env);
      const { child, exited } = cli;
      try {
        const deals = [...h.ws.deals.values()];
        const run = await h.importFile(
          h.file(
            'busy.csv',
            csv(
              ['id', 'name', 'value'],
              deals.map((d, i) => [d.id, d.name, i]),
            ),
          ),
          'deal.update',
        );
        await h.waitForRun(run.id, 20_000, (r) => r.counts.succeeded >= 2);
        await cut(proxy);
        await sleep(500);
        const signalled = Date.now();
        child.kill('SIGTERM');
        const code = await Promise.race([exited, sleep(20_000).then(() => 'still running' as const)]);
        const seconds = (Date.now() - signalled) / 1000;
        console.log(
          `[partition] (d) SIGTERM while ${state}: exit ${String(code)} after ${seconds.toFixed(1)} s (close timeout 2 s)`,
        );
        expect(code).not.toBe('still running');
        expect(seconds).toBeLessThan(2 + 5);
        // It stopped itself, not through the shutdown's last-resort exit (1), which a slower close hid once.
        expect(code).toBe(0);
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
        proxy.heal('reset');
        if (cli.stderr.includes('Error')) console.log(cli.stderr.slice(-2000));
      }
    },
    60_000,
  );
});
