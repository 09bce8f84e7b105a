import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log/index.js';
import { importFile } from '../../src/lifecycle/index.js';
import { workspaceRequestBudget } from '../../src/rate/index.js';
import { createCrmClient, openRuntime } from '../../src/runtime/index.js';
import { verifyRun } from '../../src/reconcile/index.js';
import { reconcile } from '../reconcile/fixtures.js';
import {
  calibrateRecordClock,
  csv,
  FAULTED_POST_LATENCY,
  startHarness,
  type Harness,
  dealValuesFile,
} from '../helpers/pipeline.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';
import { redisProxy, summary, viaProxy, workerBehind } from './partition-fixture.js';

/*
 * A worker and a producer whose Redis link is left half-open, and a worker cut from the CRM
 * under a known rate limit. The other partitions: partition.test.ts (vitest runs the two side by
 * side). What must hold: every process recovers within a bound, and list pages spend the shared
 * budget (0 × 429).
 */

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
