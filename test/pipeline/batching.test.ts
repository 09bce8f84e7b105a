import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { isInviteBatch } from '../../src/queue/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** Rows of each job, by job id (waiting, or completed once no job is active). */
async function jobRows(h: Harness, state: 'waiting' | 'completed'): Promise<Map<string, number[]>> {
  const queue = h.runtime.queue('acme');
  // A run completes when its last result is stored, a moment before BullMQ marks that job completed.
  for (let i = 0; state === 'completed' && i < 100 && (await queue.getActiveCount()) > 0; i++) await sleep(20);
  const jobs = await queue.getJobs([state], 0, 1000, true);
  return new Map(jobs.map((j) => [j.id!, isInviteBatch(j.data) ? [] : j.data.rows.map((r) => r.row)]));
}

describe('rows per job (updates share a job; creates go alone)', () => {
  it('update rows go rowsPerJob to a job, invalid rows are left out, creates travel alone', async () => {
    h = await startHarness({ records: 40 });
    expect(h.config.workspaces.acme?.rowsPerJob).toBe(10); // no known rate limit: the default batch
    const deals = [...h.ws.deals.values()].slice(0, 25);
    const rows: Array<Array<string | number>> = deals.map((d, i) => [d.id, `Batched ${i}`, 100 + i]);
    rows[6] = [deals[6]!.id, 'Bad value', 'seven']; // row 7: invalid, never queued
    const updates = await h.importFile(h.file('deals.csv', csv(['id', 'name', 'value'], rows)), 'deal.update');
    const creates = await h.importFile(h.file('new.csv', csv(['name', 'value'], [['New A', 1], ['New B', 2], ['New C', 3]])), 'deal.create');

    const waiting = await jobRows(h, 'waiting');
    expect(waiting.get(`${updates.id}-1`)).toEqual([1, 2, 3, 4, 5, 6, 8, 9, 10, 11]);
    expect(waiting.get(`${updates.id}-12`)).toEqual([12, 13, 14, 15, 16, 17, 18, 19, 20, 21]);
    expect(waiting.get(`${updates.id}-22`)).toEqual([22, 23, 24, 25]);
    for (const row of [1, 2, 3]) expect(waiting.get(`${creates.id}-${row}`)).toEqual([row]);
    expect(waiting.size).toBe(6);

    await h.startWorkers();
    const done = await h.waitForRun(updates.id);
    expect(done.counts).toMatchObject({ total: 25, succeeded: 24, invalid: 1, failed: 0 });
    expect((await resultsByRow(h, updates.id)).map((r) => r.row)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(h.ws.deals.get(deals[24]!.id)?.name).toBe('Batched 24');
    expect((await h.waitForRun(creates.id)).counts).toMatchObject({ total: 3, succeeded: 3 });
  });

  it('a 429 mid-batch: rows before it are recorded and never sent again, the rest go on the next start', async () => {
    // 4 requests per 2 s against one batch of 10 rows, one job in flight.
    h = await startHarness({ records: 20, simRateLimit: { max: 4, windowMs: 2000 } });
    await h.startWorkers({ concurrency: 1 });
    const deals = [...h.ws.deals.values()].slice(0, 10);
    const run = await h.importFile(h.file('deals.csv', csv(['id', 'name'], deals.map((d) => [d.id, 'Limited']))), 'deal.update');
    const done = await h.waitForRun(run.id, 30_000);
    expect(done.counts).toMatchObject({ total: 10, succeeded: 10, failed: 0 });
    expect(h.ws.stats.rateLimited).toBeGreaterThanOrEqual(2);
    expect(h.ws.stats.writes.dealUpdate).toBe(10); // each row written once
    const completed = await jobRows(h, 'completed');
    expect([...completed.keys()]).toEqual([`${run.id}-1`]);
    const job = await h.runtime.queue('acme').getJob(`${run.id}-1`);
    expect(job?.attemptsStarted).toBeGreaterThanOrEqual(3); // sent back twice or more…
    expect(job?.attemptsMade).toBe(1); // …without spending an attempt
  }, 40_000);

  it('a row of a batch that fails transiently is retried alone; the batch\'s other rows are not sent again', async () => {
    h = await startHarness({ records: 60, faults: { errorRate: 0.3 }, retry: { attempts: 12, backoffMs: 20 } });
    await h.startWorkers({ concurrency: 4 });
    const deals = [...h.ws.deals.values()].slice(0, 40);
    const run = await h.importFile(h.file('deals.csv', csv(['id', 'name'], deals.map((d) => [d.id, 'Flaky']))), 'deal.update');
    const done = await h.waitForRun(run.id, 30_000);
    expect(done.counts).toMatchObject({ total: 40, succeeded: 40, failed: 0 });
    const fiveHundreds = Object.entries(h.ws.stats.byStatus).filter(([status]) => status.startsWith('5'));
    expect(fiveHundreds.reduce((n, [, count]) => n + count, 0)).toBeGreaterThan(0);
    // A 5xx of the simulator comes before any write: 40 writes means no row went twice.
    expect(h.ws.stats.writes.dealUpdate).toBe(40);
    const alone = [...(await jobRows(h, 'completed'))].filter(([id]) => /-s\d+$/.test(id));
    expect(alone.length).toBeGreaterThan(0);
    for (const [id, rows] of alone) expect(id).toBe(`${id.replace(/-s\d+$/, '')}-s${rows[0]}`);
  }, 40_000);

  it('a worker with a known rate limit splits a batch it receives into one job per row (the limiter counts jobs)', async () => {
    h = await startHarness({ records: 30, knownRateLimit: { max: 50, durationMs: 1000 } });
    expect(h.config.workspaces.acme?.rowsPerJob).toBe(1);
    await h.startWorkers();
    const deals = [...h.ws.deals.values()].slice(0, 12);
    // As if the producer's config had no limit.
    const run = await h.importFile(h.file('deals.csv', csv(['id', 'name'], deals.map((d) => [d.id, 'Split']))), 'deal.update', { rowsPerJob: 6 });
    const done = await h.waitForRun(run.id, 20_000);
    expect(done.counts).toMatchObject({ total: 12, succeeded: 12, failed: 0 });
    expect(h.ws.stats.writes.dealUpdate).toBe(12);
    const completed = await jobRows(h, 'completed');
    for (let row = 1; row <= 12; row++) {
      const parent = row <= 6 ? 1 : 7;
      expect(completed.get(`${run.id}-${parent}-s${row}`)).toEqual([row]);
    }
  });
});
