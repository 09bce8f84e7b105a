import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ingest } from '../../src/ingest/index.js';
import { pendingJobCount } from '../../src/queue/index.js';
import { produceSource } from '../../src/lifecycle/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('bounds', () => {
  it('the producer never lets more than the high-water mark (plus one chunk) wait in Redis', async () => {
    h = await startHarness({ records: 600, latencyMs: 10 });
    await h.startWorkers({ concurrency: 2 });
    const deals = [...h.ws.deals.values()];
    const file = h.file(
      'deals.csv',
      csv(
        ['id', 'name'],
        deals.map((d, i) => [d.id, `HW ${i}`]),
      ),
    );
    const queue = h.runtime.queue('acme');
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await pendingJobCount(queue));
        await sleep(20);
      }
    })();
    const run = await h.importFile(file, 'deal.update', { highWaterMark: 100, chunkSize: 50 });
    const done = await h.waitForRun(run.id, 60_000);
    sampling = false;
    await sampler;
    expect(done.counts.succeeded).toBe(600);
    // Both bounds count rows; jobs carry rowsPerJob rows each (10 here).
    const perJob = h.config.workspaces.acme!.rowsPerJob;
    expect(perJob).toBe(10);
    expect(peak).toBeGreaterThan(0);
    expect(peak * perJob).toBeLessThanOrEqual(150);
  }, 70_000);

  it('a row rate-limited on every start gives up after maxStartedAttempts instead of looping forever', async () => {
    // The workers are told a limit far above the CRM's, so starts keep meeting 429s (a learned
    // rate measures the CRM's 1/s after two 429s and would meet few).
    h = await startHarness({
      records: 10,
      simRateLimit: { max: 1, windowMs: 1000 },
      knownRateLimit: { max: 50, durationMs: 1000 },
    });
    await h.startWorkers({ concurrency: 4, maxStartedAttempts: 2 });
    const deals = [...h.ws.deals.values()].slice(0, 6);
    const file = h.file(
      'deals.csv',
      csv(
        ['id', 'name'],
        deals.map((d) => [d.id, 'Capped']),
      ),
    );
    // One row per job: the cap is the row's own (a batch's is shared; see batching.test.ts).
    const run = await h.waitForRun((await h.importFile(file, 'deal.update', { rowsPerJob: 1 })).id, 40_000);
    expect(run.counts.total).toBe(6);
    expect(run.counts.queued).toBe(0);
    expect(run.counts.failed).toBeGreaterThan(0);
    const results = await resultsByRow(h, run.id);
    expect(results).toHaveLength(6);
    for (const r of results.filter((x) => x.status === 'failed')) expect(r.message).toMatch(/gave up/);
  }, 50_000);

  it('rows the producer still holds when the run is aborted are recorded RUN_ABORTED, never queued', async () => {
    h = await startHarness({ records: 50 });
    const deals = [...h.ws.deals.values()];
    const file = h.file(
      'deals.csv',
      csv(
        ['id', 'name'],
        deals.map((d) => [d.id, 'Stop']),
      ),
    );
    const { reader, rows } = await ingest(file, { op: 'deal.update' });
    const stop = new AbortController();
    // The first two chunks go out; the run is aborted as row 21 is read.
    async function* abortAt21() {
      for await (const row of rows) {
        if (row.row === 21) stop.abort({ kind: 'aborted', reason: 'too many failed rows' });
        yield row;
      }
    }
    const { run } = await produceSource({
      store: h.runtime.store,
      queue: h.runtime.queue('acme'),
      reader,
      rows: () => abortAt21(),
      chunkSize: 10,
      run: { workspace: 'acme', operation: 'deal.update', source: file },
      signal: stop.signal,
    });
    expect(run.counts).toMatchObject({ total: 50, queued: 20, failed: 30 });
    expect(await h.runtime.queue('acme').getWaitingCount()).toBe(20);
    const aborted = await h.runtime.store.getResult(run.id, 21);
    expect(aborted).toMatchObject({ status: 'failed', code: 'RUN_ABORTED', message: 'not sent: too many failed rows' });
    expect(h.ws.stats.requests).toBe(0);
  });
});
