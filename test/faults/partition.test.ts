import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerPool } from '../../src/worker/index.js';
import { expectOwnDealsOnly } from '../chaos/chaos-check.js';
import { captureLogger } from '../helpers/log-capture.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { testRedisUrlVia } from '../helpers/redis.js';
import { harnessArgs, startCli } from '../helpers/run-cli.js';
import { LOCK_MS, redisProxy, summary, workerBehind } from './partition-fixture.js';

/*
 * Network partitions between a worker and Redis (a TCP proxy per link that blackholes, resets
 * or leaves sockets hung), scaled down: a 2 s job lock instead of 30 s. What must hold: one
 * result per row, every record at its last row's value, no duplicate deals, results never
 * rewritten by a stale worker, and every process recovers or stops within a bound. Half-open
 * links and a worker cut from the CRM: partition-half-open.test.ts (vitest runs the two side by side).
 */

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
