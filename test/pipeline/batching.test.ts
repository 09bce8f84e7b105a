import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { isInviteBatch, toJobData } from '../../src/queue/index.js';
import { retryRun } from '../../src/lifecycle/index.js';
import { abortRun } from '../../src/schedule/abort-run.js';
import { succeeded } from '../../src/runs/index.js';
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
    const creates = await h.importFile(
      h.file(
        'new.csv',
        csv(
          ['name', 'value'],
          [
            ['New A', 1],
            ['New B', 2],
            ['New C', 3],
          ],
        ),
      ),
      'deal.create',
    );

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
    const run = await h.importFile(
      h.file(
        'deals.csv',
        csv(
          ['id', 'name'],
          deals.map((d) => [d.id, 'Limited']),
        ),
      ),
      'deal.update',
    );
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

  it("a row of a batch that fails transiently is retried alone; the batch's other rows are not sent again", async () => {
    h = await startHarness({ records: 60, faults: { errorRate: 0.3 }, retry: { attempts: 12, backoffMs: 20 } });
    await h.startWorkers({ concurrency: 4 });
    const deals = [...h.ws.deals.values()].slice(0, 40);
    const run = await h.importFile(
      h.file(
        'deals.csv',
        csv(
          ['id', 'name'],
          deals.map((d) => [d.id, 'Flaky']),
        ),
      ),
      'deal.update',
    );
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

  it("under a known rate limit rows still share jobs: each request takes its own token, 0 × 429 at the CRM's own limit", async () => {
    // The CRM allows exactly the known limit; two worker pools (two processes' worth) share it.
    h = await startHarness({
      records: 60,
      simRateLimit: { max: 20, windowMs: 1000 },
      knownRateLimit: { max: 20, durationMs: 1000 },
    });
    expect(h.config.workspaces.acme?.rowsPerJob).toBe(10);
    await h.startWorkers({ concurrency: 4 });
    await h.startWorkers({ concurrency: 4 });
    const deals = [...h.ws.deals.values()].slice(0, 60);
    const run = await h.importFile(
      h.file(
        'deals.csv',
        csv(
          ['id', 'name'],
          deals.map((d) => [d.id, 'Shared']),
        ),
      ),
      'deal.update',
    );
    const done = await h.waitForRun(run.id, 30_000);
    expect(done.counts).toMatchObject({ total: 60, succeeded: 60, failed: 0 });
    // 60 requests through a bucket of 20 (full at the start): a limit counted in jobs (6 of
    // them) would have let them all go at once and drawn 40 × 429.
    expect(h.ws.stats.rateLimited).toBe(0);
    expect(h.ws.stats.writes.dealUpdate).toBe(60);
    const completed = await jobRows(h, 'completed');
    expect(completed.size).toBe(6);
    for (const rows of completed.values()) expect(rows).toHaveLength(10);
  }, 40_000);

  describe('a batch sent back by a 429 keeps only its unsent rows', () => {
    /**
     * One batch of 10 rows, row 2 a 404; 4 requests per 4 s, one job in flight: rows 1-4 go,
     * row 5 meets the 429 (paced at the learned rate's start, 10/s, the CRM refills 0.4 of a
     * token meanwhile).
     */
    async function pausedBatch() {
      // Counts the CRM's requests and tokens exactly: no list reads of before-values (readBefore) among them.
      h = await startHarness({
        records: 20,
        simRateLimit: { max: 4, windowMs: 4000 },
        workspace: { readBefore: false },
      });
      await h.startWorkers({ concurrency: 1 });
      const deals = [...h.ws.deals.values()].slice(0, 10);
      const rows = deals.map((d) => [d.id, 'Kept']);
      rows[1] = ['deal_does_not_exist', 'Ghost'];
      const run = await h.importFile(h.file('deals.csv', csv(['id', 'name'], rows)), 'deal.update');
      const queue = h.runtime.queue('acme');
      let left: number[] = [];
      for (let i = 0; i < 200 && left.length === 0; i++) {
        const job = await queue.getJob(`${run.id}-1`);
        // Data read again once it waits: the copy read before may predate the 429's update.
        const waiting =
          job && (await job.getState()) === 'waiting' && h.ws.stats.rateLimited > 0
            ? await queue.getJob(`${run.id}-1`)
            : undefined;
        if (waiting) left = toJobData(waiting.data).rows.map((r) => r.row);
        else await sleep(10);
      }
      return { run, left };
    }

    it('its data shrinks to the unsent rows, so a retry of a failed row is not raced by the old batch', async () => {
      const { run, left } = await pausedBatch();
      expect(left).toEqual([5, 6, 7, 8, 9, 10]);
      expect(await h!.runtime.store.getResult(run.id, 2)).toMatchObject({ status: 'failed', httpStatus: 404 });
      // Retry row 2 while its old batch waits out the 429.
      await retryRun({ runId: run.id, queue: h!.runtime.queue('acme'), store: h!.runtime.store, rows: [2] });
      const done = await h!.waitForRun(run.id, 30_000);
      expect(done.counts).toMatchObject({ total: 10, succeeded: 9, failed: 1, queued: 0 });
      // Row 2 went twice: once in the batch, once in its retry; the old batch did not send it again.
      expect(h!.ws.stats.byStatus[404]).toBe(2);
      expect(h!.ws.stats.writes.dealUpdate).toBe(9);
    }, 40_000);

    it('an abort records only its unsent rows; results of rows it sent stand', async () => {
      const { run, left } = await pausedBatch();
      expect(left).toHaveLength(6);
      const aborted = await abortRun(h!.runtime.store, h!.runtime.queue('acme'), run.id, 'stop');
      expect(aborted).toBe(6);
      expect(await h!.runtime.store.getResult(run.id, 2)).toMatchObject({ status: 'failed', code: 'CRM_NOT_FOUND' });
      expect(await h!.runtime.store.getResult(run.id, 5)).toMatchObject({ status: 'failed', code: 'RUN_ABORTED' });
      expect((await h!.runtime.store.requireRun(run.id)).counts).toMatchObject({
        total: 10,
        succeeded: 3,
        failed: 7,
        queued: 0,
      });
    }, 40_000);
  });

  it('a batch on its last allowed start hands its unsent rows to jobs of their own (the cap is not theirs to fail on)', async () => {
    h = await startHarness({ records: 10, simRateLimit: { max: 1, windowMs: 1000 } });
    await h.startWorkers({ concurrency: 1, maxStartedAttempts: 2 });
    const deals = [...h.ws.deals.values()].slice(0, 4);
    const run = await h.importFile(
      h.file(
        'deals.csv',
        csv(
          ['id', 'name'],
          deals.map((d) => [d.id, 'Capped']),
        ),
      ),
      'deal.update',
    );
    const done = await h.waitForRun(run.id, 30_000);
    expect(done.counts).toMatchObject({ total: 4, queued: 0 });
    expect(await resultsByRow(h, run.id)).toHaveLength(4);
    const jobs = await jobRows(h, 'completed');
    const handedOff = [...jobs.keys()].filter((id) => id.startsWith(`${run.id}-1-s`));
    expect(handedOff.length).toBeGreaterThan(0);
    // Each handed-off row started at most twice on its own, and no row was failed by the batch's cap.
    for (const id of handedOff)
      expect((await h.runtime.queue('acme').getJob(id))?.attemptsStarted).toBeLessThanOrEqual(2);
    const batch = await h.runtime.queue('acme').getJob(`${run.id}-1`);
    expect(batch?.attemptsStarted).toBe(2);
  }, 40_000);

  it('a job queued by an earlier version (one row, no `rows`) is still processed and can be aborted', async () => {
    h = await startHarness({ records: 10 });
    const store = h.runtime.store;
    const queue = h.runtime.queue('acme');
    const [a, b] = [...h.ws.deals.values()];
    const legacy = (runId: string, row: number, id: string) => ({
      runId,
      row,
      line: row + 1,
      payload: { op: 'deal.update' as const, id, fields: { name: 'Legacy' } },
      original: { id, name: 'Legacy' },
    });
    const run = await store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'legacy.csv' });
    await store.addQueued(run.id, 2);
    // Cast: the queue's type is today's shape; an older version wrote this one.
    await queue.add('deal.update', legacy(run.id, 1, a!.id) as never, { jobId: `${run.id}-1` });
    await queue.add('deal.update', legacy(run.id, 2, b!.id) as never, { jobId: `${run.id}-2` });
    await store.finishProducing(run.id);
    expect(await abortRun(store, queue, run.id, 'one of them')).toBe(2);
    expect(await store.getResult(run.id, 2)).toMatchObject({
      status: 'failed',
      code: 'RUN_ABORTED',
      original: { name: 'Legacy' },
    });

    const second = await store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'legacy.csv' });
    await store.addQueued(second.id, 1);
    await queue.add('deal.update', legacy(second.id, 1, a!.id) as never, { jobId: `${second.id}-1` });
    await store.finishProducing(second.id);
    await h.startWorkers();
    expect((await h.waitForRun(second.id)).counts).toMatchObject({ total: 1, succeeded: 1 });
    expect(h.ws.deals.get(a!.id)?.name).toBe('Legacy');
  });

  it('a redelivered invite batch sends only the addresses without a result (an invite is an email to a person)', async () => {
    h = await startHarness({ records: 5 });
    const emails = Array.from({ length: 10 }, (_, i) => [`redelivered${i}@invites.example`]);
    const run = await h.importFile(h.file('inv.csv', csv(['email'], emails)), 'team.invite', { inviteBatchSize: 10 });
    // A worker sent rows 1-4 and stored their results, then lost the job: it comes back whole.
    await h.runtime.store.recordResults(
      run.id,
      [1, 2, 3, 4].map((row) => succeeded({ row, line: row + 1 }, `redelivered${row - 1}@invites.example`)),
    );
    const before = h.ws.stats.writes.teamMembers;
    await h.startWorkers();
    const done = await h.waitForRun(run.id);
    expect(done.counts).toMatchObject({ total: 10, succeeded: 10 });
    expect(h.ws.stats.writes.teamMembers - before).toBe(1);
    for (let i = 0; i < 4; i++) expect(h.ws.teamMembers.has(`redelivered${i}@invites.example`)).toBe(false);
    for (let i = 4; i < 10; i++) expect(h.ws.teamMembers.has(`redelivered${i}@invites.example`)).toBe(true);
  });
});
