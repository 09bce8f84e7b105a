import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { METRIC, readCounters } from '../../src/metrics/index.js';
import { resumeWorkspace } from '../../src/queue/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

function dealUpdateFile(harness: Harness, count: number, name = 'deals.csv'): string {
  const deals = [...harness.ws.deals.values()].slice(0, count);
  return harness.file(
    name,
    csv(
      ['id', 'name', 'value'],
      deals.map((d, i) => [d.id, d.name, 500 + i]),
    ),
  );
}

describe('workers under faults', () => {
  it('a 429 storm (limit far below demand) ends with every row succeeded and no attempt spent on 429s', async () => {
    // One attempt per row: a 429 that counted as an attempt would fail its row at once.
    h = await startHarness({
      records: 120,
      simRateLimit: { max: 10, windowMs: 500 },
      retry: { attempts: 1, backoffMs: 100 },
    });
    await h.startWorkers({ concurrency: 16 });
    const run = await h.waitForRun((await h.importFile(dealUpdateFile(h, 120), 'deal.update')).id, 45_000);
    expect(run.counts).toMatchObject({ total: 120, succeeded: 120, failed: 0 });
    expect(h.ws.stats.rateLimited).toBeGreaterThan(0);
    expect(h.ws.stats.writes.dealUpdate).toBe(120);
    const completed = await h.runtime.queue('acme').getCompleted(0, 200);
    expect(completed.some((j) => j.attemptsStarted > 1)).toBe(true); // requeued by 429s…
    expect(completed.every((j) => j.attemptsMade === 1)).toBe(true); // …and done on their one attempt
    // Every 429 the CRM sent reaches the fleet counters behind /metrics (flushed once a second).
    const limited = async () =>
      (await readCounters(h!.runtime.redis, h!.config.prefix))
        .filter((c) => c.metric === METRIC.rateLimited)
        .reduce((n, c) => n + c.value, 0);
    for (let i = 0; i < 40 && (await limited()) < h.ws.stats.rateLimited; i++) await sleep(100);
    expect(await limited()).toBe(h.ws.stats.rateLimited);
  }, 60_000);

  it('a 429 pauses the whole workspace queue for Retry-After, not just the one job', async () => {
    // Counts the CRM's requests and tokens exactly: no list reads of before-values (readBefore) among them.
    h = await startHarness({ records: 10, simRateLimit: { max: 1, windowMs: 5000 }, workspace: { readBefore: false } });
    await h.startWorkers({ concurrency: 8 });
    const queue = h.runtime.queue('acme');
    await h.importFile(dealUpdateFile(h, 8), 'deal.update');
    for (let i = 0; i < 200 && h.ws.stats.rateLimited === 0; i++) await sleep(25);
    expect(h.ws.stats.rateLimited).toBeGreaterThan(0);
    // The worker pauses the queue when the 429's answer reaches it, a moment after the simulator counted it.
    let ttl = 0;
    for (let i = 0; i < 100 && ttl <= 0; i++) {
      ttl = await queue.getRateLimitTtl();
      if (ttl <= 0) await sleep(25);
    }
    expect(ttl).toBeGreaterThan(0);
    const seen = h.ws.stats.rateLimited;
    await sleep(1500);
    // Paused for the 5 s Retry-After: nobody knocks again meanwhile (at most the requests
    // that were already in flight when the first 429 came back).
    expect(h.ws.stats.rateLimited).toBeLessThanOrEqual(Math.max(seen, 8));
    expect(h.ws.stats.writes.dealUpdate).toBe(1);
  }, 20_000);

  it('a known limit is shared by all workers: two worker pools together stay under it', async () => {
    h = await startHarness({
      records: 90,
      simRateLimit: { max: 40, windowMs: 1000 },
      knownRateLimit: { max: 30, durationMs: 1000 },
    });
    // Each pool alone would allow 30/s; two separate limiters (60/s) would draw many 429s.
    await h.startWorkers({ concurrency: 8 });
    await h.startWorkers({ concurrency: 8 });
    const run = await h.waitForRun((await h.importFile(dealUpdateFile(h, 90), 'deal.update')).id, 30_000);
    expect(run.counts.succeeded).toBe(90);
    expect(h.ws.stats.rateLimited).toBeLessThanOrEqual(2);
  }, 40_000);

  it('5xx answers and connection resets are retried until they pass', async () => {
    // A request faults with p = 0.19; ten attempts make a failed row a ~1e-7 event per run.
    h = await startHarness({
      records: 60,
      faults: { errorRate: 0.1, resetRate: 0.1 },
      retry: { attempts: 10, backoffMs: 50 },
    });
    await h.startWorkers({ concurrency: 8 });
    const queue = h.runtime.queue('acme');
    const run = await h.importFile(dealUpdateFile(h, 60), 'deal.update');
    const done = await h.waitForRun(run.id, 40_000);
    expect(done.counts).toMatchObject({ total: 60, succeeded: 60, failed: 0 });
    expect(h.ws.stats.errors5xx + h.ws.stats.resets).toBeGreaterThan(0);
    expect(await queue.getFailedCount()).toBe(0);
  }, 50_000);

  it('a refused API key blocks the run without burning rows; resume finishes it', async () => {
    h = await startHarness({ records: 30 });
    await h.startWorkers({ concurrency: 4 });
    h.ws.revokeApiKey(h.apiKey);
    const run = await h.importFile(dealUpdateFile(h, 30), 'deal.update');
    const blocked = await h.waitForRun(run.id, 15_000, (r) => r.status === 'blocked');
    expect(blocked.reason).toMatch(/refused the API key/);
    expect(blocked.reason).not.toContain(h.apiKey);
    expect(blocked.counts.failed).toBe(0);
    expect(blocked.counts.queued).toBe(30);
    expect(await h.runtime.queue('acme').isPaused()).toBe(true);

    // Once no job is active no request is left in flight: this test is about the resume itself (a
    // 401 still in flight during the resume has its own test below).
    const queue = h.runtime.queue('acme');
    const settleBy = Date.now() + 15_000;
    while ((await queue.getActiveCount()) > 0) {
      if (Date.now() > settleBy) throw new Error('jobs still active 15 s after the run was blocked');
      await sleep(50);
    }
    h.ws.addApiKey(h.apiKey);
    expect(await resumeWorkspace({ queue, store: h.runtime.store, workspace: 'acme' })).toContain(run.id);
    const done = await h.waitForRun(run.id, 20_000);
    expect(done).toMatchObject({ status: 'completed', counts: { succeeded: 30, failed: 0 } });
  }, 40_000);

  it('a 401 answered after `runs resume` to a request sent before it does not block the workspace again', async () => {
    // Run B's request is refused on arrival, but the proxy holds its 401 for 3 s; run A's 401 comes
    // at once and blocks the workspace; the key is put back and the runs resumed; B's 401 then
    // arrives, an answer about the key as it was, and must not block the workspace again.
    h = await startHarness({ records: 10, crmProxy: true });
    const proxy = h.proxy!;
    const [first, second] = [...h.ws.deals.values()];
    const bPath = new RegExp(`/v2/deals/${second!.id}$`);
    proxy.setRules([{ method: 'PATCH', path: bPath, holdAnswer: 3000, times: 1 }]);
    await h.startWorkers({ concurrency: 4 });
    h.ws.revokeApiKey(h.apiKey);
    const runB = await h.importFile(h.file('b.csv', csv(['id', 'name'], [[second!.id, 'B']])), 'deal.update');
    const sentBy = Date.now() + 15_000;
    while (proxy.count('PATCH', bPath) === 0) {
      if (Date.now() > sentBy) throw new Error("run B's request never left");
      await sleep(20);
    }
    const runA = await h.importFile(h.file('a.csv', csv(['id', 'name'], [[first!.id, 'A']])), 'deal.update');
    await h.waitForRun(runA.id, 15_000, (r) => r.status === 'blocked');
    h.ws.addApiKey(h.apiKey);
    const queue = h.runtime.queue('acme');
    const resumeStarted = Date.now();
    await resumeWorkspace({ queue, store: h.runtime.store, workspace: 'acme' });
    const resumed = Date.now();
    // B's request left before the resume, and its held 401 was answered after it.
    const b = proxy.requests.find((r) => bPath.test(r.path))!;
    expect(b.forwardedAt!).toBeLessThan(resumeStarted);
    expect(b.forwardedAt! + 3000).toBeGreaterThan(resumed);
    const [doneA, doneB] = await Promise.all([h.waitForRun(runA.id, 20_000), h.waitForRun(runB.id, 20_000)]);
    expect(b.outcome).toBe('answered');
    expect(proxy.unspent()).toBe(0);
    expect(doneA).toMatchObject({ status: 'completed', counts: { succeeded: 1, failed: 0 } });
    expect(doneB).toMatchObject({ status: 'completed', counts: { succeeded: 1, failed: 0 } });
    expect((await h.runtime.store.holds('acme')).blocked).toBeUndefined();
    expect(await queue.isPaused()).toBe(false);
    expect(h.ws.deals.get(second!.id)?.name).toBe('B');
  }, 60_000);

  it('`runs resume` with the key still refused blocks the workspace again, and burns no row', async () => {
    h = await startHarness({ records: 10 });
    await h.startWorkers({ concurrency: 2 });
    h.ws.revokeApiKey(h.apiKey);
    const run = await h.importFile(dealUpdateFile(h, 10), 'deal.update');
    await h.waitForRun(run.id, 15_000, (r) => r.status === 'blocked');
    const queue = h.runtime.queue('acme');
    const refusedBefore = h.ws.stats.byStatus[401] ?? 0;
    // The operator resumes without fixing the key: the next requests go after the lift, and
    // their 401s are refusals of the key now, not stale answers.
    expect(await resumeWorkspace({ queue, store: h.runtime.store, workspace: 'acme' })).toContain(run.id);
    const again = await h.waitForRun(run.id, 15_000, (r) => r.status === 'blocked');
    expect(h.ws.stats.byStatus[401] ?? 0).toBeGreaterThan(refusedBefore);
    expect(again.counts).toMatchObject({ failed: 0, succeeded: 0, queued: 10 });
    expect((await h.runtime.store.holds('acme')).blocked).toBeDefined();
    expect(await queue.isPaused()).toBe(true);
    expect(h.ws.stats.writes.dealUpdate).toBe(0);
  }, 40_000);

  it('a rejected invite batch is bisected: every good address is added, each bad one fails alone', async () => {
    h = await startHarness({ records: 5 });
    await h.startWorkers({ concurrency: 4 });
    h.ws.blockEmailDomain('blocked.example');
    const rows = Array.from({ length: 20 }, (_, i) => [
      i === 3 || i === 14 ? `bad${i}@blocked.example` : `ok${i}@good.example`,
    ]);
    const run = await h.waitForRun(
      (await h.importFile(h.file('inv.csv', csv(['email'], rows)), 'team.invite', { inviteBatchSize: 20 })).id,
    );
    expect(run.counts).toMatchObject({ total: 20, succeeded: 18, failed: 2 });
    const results = await resultsByRow(h, run.id);
    expect(results.filter((r) => r.status === 'failed').map((r) => r.row)).toEqual([4, 15]);
    expect(results.find((r) => r.row === 4)?.message).toMatch(/bad3@blocked\.example/);
    for (let i = 0; i < 20; i++) expect(h.ws.teamMembers.has(`ok${i}@good.example`)).toBe(i !== 3 && i !== 14);
  }, 30_000);
});
