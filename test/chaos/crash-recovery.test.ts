import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { resumeProducer } from '../../src/lifecycle/index.js';
import { produceRun } from '../../src/lifecycle/producer.js';
import type { RunRecord } from '../../src/runs/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { harnessArgs, startCli } from '../helpers/run-cli.js';
import { expectEveryRowOnce, spawnWorker } from './chaos-check.js';

// Worker and import processes that die; Redis itself killed -9 and restarted: redis-restart.test.ts.
let h: Harness | undefined;
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  await h?.close();
  h = undefined;
});

/**
 * Waits for the run to leave `running`. Fails once its counts have not moved for `stallMs` (the
 * resume is stuck), or after `capMs` in all.
 */
async function waitWhileMoving(
  harness: Harness,
  runId: string,
  { stallMs, capMs }: { stallMs: number; capMs: number },
): Promise<RunRecord> {
  const start = Date.now();
  let seen = '';
  let movedAt = start;
  for (;;) {
    const run = await harness.runtime.store.requireRun(runId);
    if (run.status !== 'running') return run;
    const now = Date.now();
    const counts = JSON.stringify(run.counts);
    if (counts !== seen) {
      seen = counts;
      movedAt = now;
    }
    if (now - movedAt > stallMs) throw new Error(`run ${runId}: counts did not move for ${stallMs} ms: ${counts}`);
    if (now - start > capMs) throw new Error(`run ${runId} still running after ${capMs} ms: ${counts}`);
    await sleep(100);
  }
}

describe('crash recovery', () => {
  it('a worker process killed with SIGKILL mid-run loses no row once another worker starts', async () => {
    // 60 ms per request at concurrency 8: ~2 s of work left when the worker is killed.
    h = await startHarness({ records: 300, latencyMs: 60 });
    const deals = [...h.ws.deals.values()];
    const file = h.file(
      'deals.csv',
      csv(
        ['id', 'name', 'value'],
        deals.map((d, i) => [d.id, `K ${i}`, i]),
      ),
    );
    const first = spawnWorker(h, children);
    const run = await h.importFile(file, 'deal.update');
    await h.waitForRun(run.id, 30_000, (r) => r.counts.succeeded >= 60);
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    const mid = await h.runtime.store.requireRun(run.id);
    expect(mid.counts.succeeded).toBeLessThan(300);
    spawnWorker(h, children);
    const done = await h.waitForRun(run.id, 60_000);
    expect(done.counts).toMatchObject({ total: 300, succeeded: 300, failed: 0, queued: 0 });
    await expectEveryRowOnce(h, run.id, 300);
    for (const [i, d] of deals.entries()) expect(h.ws.deals.get(d.id)?.name).toBe(`K ${i}`);
  }, 90_000);

  it('SIGTERM finishes in-flight requests and exits 0; the next worker takes the rest', async () => {
    h = await startHarness({ records: 200, latencyMs: 60 });
    const deals = [...h.ws.deals.values()];
    const file = h.file(
      'deals.csv',
      csv(
        ['id', 'name'],
        deals.map((d, i) => [d.id, `T ${i}`]),
      ),
    );
    const first = spawnWorker(h, children);
    const run = await h.importFile(file, 'deal.update');
    await h.waitForRun(run.id, 30_000, (r) => r.counts.succeeded >= 30);
    first.kill('SIGTERM');
    const code = await new Promise((resolve) => first.once('exit', resolve));
    expect(code).toBe(0);
    const mid = await h.runtime.store.requireRun(run.id);
    expect(mid.counts.failed).toBe(0);
    expect(mid.counts.succeeded).toBeLessThan(200);
    // Every request it had sent was answered and recorded before it exited: none left active.
    expect(h.ws.stats.writes.dealUpdate).toBe(mid.counts.succeeded);
    expect(await h.runtime.queue('acme').getActiveCount()).toBe(0);
    spawnWorker(h, children);
    const done = await h.waitForRun(run.id, 60_000);
    expect(done.counts).toMatchObject({ total: 200, succeeded: 200, failed: 0 });
    await expectEveryRowOnce(h, run.id, 200);
  }, 90_000);

  it('an import killed with SIGKILL while reading its file is failed with the way to resume it, and runs resume finishes it: one result per row', async () => {
    h = await startHarness({ records: 1500 });
    const deals = [...h.ws.deals.values()];
    const file = h.file(
      'deals.csv',
      csv(
        ['id', 'name'],
        deals.map((d, i) => [d.id, `P ${i}`]),
      ),
    );
    // No workers yet and a high-water mark of 20: after its first 500-row chunk the import
    // stops reading and waits for room, alive but mid-file.
    const importer = startCli(
      harnessArgs(h, ['import', file, '--op', 'deal.update', '-w', 'acme', '--high-water', '20']).args,
      h.env,
    ).child;
    children.push(importer);
    let runId: string | undefined;
    for (let i = 0; i < 200 && !runId; i++) {
      runId = (await h.runtime.store.listRuns({ workspace: 'acme' })).runs[0]?.id;
      await sleep(50);
    }
    await h.waitForRun(runId!, 20_000, (r) => r.counts.queued >= 500);
    expect(importer.exitCode).toBeNull();
    const exited = new Promise((resolve) => importer.once('exit', resolve));
    importer.kill('SIGKILL');
    await exited;
    expect(await h.runtime.store.requireRun(runId!)).toMatchObject({ status: 'running', producerDone: false });
    await h.startWorkers({ sweepIntervalMs: 200, producerSilenceMs: 1000 });
    const failed = await h.waitForRun(runId!, 20_000, (r) => r.status === 'failed');
    expect(failed.reason).toMatch(new RegExp(`stopped after \\d+ rows.*crm-sync runs resume ${runId}`));
    expect(failed.counts.total).toBeLessThan(1500);
    // Resume: the file is read again from where the producer got, nothing counted twice.
    const { progress } = await resumeProducer({
      runId: runId!,
      queue: h.runtime.queue('acme'),
      store: h.runtime.store,
    });
    // A loaded machine makes the resume slow, not stuck: it fails when the counts stop moving.
    const done = await waitWhileMoving(h, runId!, { stallMs: 40_000, capMs: 150_000 });
    const results = await resultsByRow(h, runId!);
    console.log(
      `[crash] import killed mid-file, then resumed: ${progress.read} rows read by the resume, run ${done.status} ${JSON.stringify(done.counts)}, writes ${h.ws.stats.writes.dealUpdate}`,
    );
    expect(done).toMatchObject({ status: 'completed', counts: { total: 1500, succeeded: 1500, queued: 0 } });
    expect(results.map((r) => r.row)).toEqual(Array.from({ length: 1500 }, (_, i) => i + 1));
    for (const [i, d] of deals.entries()) expect(h.ws.deals.get(d.id)?.name).toBe(`P ${i}`);
  }, 210_000); // the resume's 150 s cap, and up to 50 s of waits before it

  it('an import that dies after queueing its last row, before saying it finished, is completed by the sweep, not failed', async () => {
    h = await startHarness({ records: 300 });
    const deals = [...h.ws.deals.values()];
    const store = h.runtime.store;
    const run = await store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: 'deals.csv',
      columns: [],
    });
    async function* rows() {
      for (const [i, d] of deals.entries()) {
        const original = { id: d.id, name: `Last ${i}` };
        yield {
          row: i + 1,
          line: i + 2,
          original,
          payload: { op: 'deal.update' as const, id: d.id, fields: { name: `Last ${i}` } },
        };
      }
    }
    // The producer's whole loop, then the process dies where finishRun would have run.
    await produceRun(rows(), {
      queue: h.runtime.queue('acme'),
      store,
      runId: run.id,
      sourceColumns: () => ['id', 'name'],
    });
    expect(await store.requireRun(run.id)).toMatchObject({
      status: 'running',
      producerDone: false,
      columns: ['id', 'name'],
    });
    await h.startWorkers({ sweepIntervalMs: 200, producerSilenceMs: 1000 });
    const done = await h.waitForRun(run.id, 30_000, (r) => r.status !== 'running');
    expect(done).toMatchObject({ status: 'completed', counts: { total: 300, succeeded: 300, queued: 0 } });
    await expectEveryRowOnce(h, run.id, 300);
    for (const [i, d] of deals.entries()) expect(h.ws.deals.get(d.id)?.name).toBe(`Last ${i}`);
  }, 60_000);
});
