import { execFileSync } from 'node:child_process';
import { createWriteStream, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 30 });
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);
const deals = () => [...h.ws.deals.values()];
async function waitFor<T>(read: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('runs cancel (child processes, as an operator runs them)', () => {
  it('removes the waiting rows as cancelled, sends nothing; the cancelled rows are exported and runs retry sends them', async () => {
    const some = deals().slice(0, 5);
    const before = h.ws.stats.requests;
    const queued = await cli([
      'import',
      h.file(
        'c.csv',
        csv(
          ['id', 'name'],
          some.map((d) => [d.id, 'Cancelled then retried']),
        ),
      ),
      '--op',
      'deal.update',
      '-w',
      'acme',
      '--json',
    ]);
    expect(queued.code).toBe(0);
    const { id } = JSON.parse(queued.stdout) as { id: string };

    const cancelled = await cli(['runs', 'cancel', id, '--reason', 'wrong file']);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toContain('removed from the queue: 5 waiting rows, recorded cancelled');
    const run = await h.runtime.store.requireRun(id);
    expect(run).toMatchObject({
      status: 'cancelled',
      reason: 'wrong file',
      counts: { total: 5, queued: 0, cancelled: 5 },
    });
    expect(run.finishedAt).toBeDefined();
    const waiting = await h.runtime.queue('acme').getJobs(['waiting', 'delayed', 'prioritized']);
    expect(waiting.filter((j) => j?.data.runId === id)).toEqual([]);
    expect((await resultsByRow(h, id)).map((r) => [r.status, r.code, r.message])).toEqual(
      Array(5).fill(['cancelled', 'RUN_CANCELLED', 'not sent: wrong file']),
    );
    expect(h.ws.stats.requests).toBe(before);

    // Three commands that change nothing (the cancel is refused): started together, they cost
    // one CLI start of wall time.
    const [shown, exported, again] = await Promise.all([
      cli(['runs', 'show', id]),
      cli(['runs', 'export', id, '--failed', '--out', '-']),
      cli(['runs', 'cancel', id]),
    ]);
    expect(shown.code).toBe(1);
    expect(shown.stdout).toMatch(/status: cancelled .*wrong file/);
    expect(shown.stdout).toContain('5 cancelled');
    expect(exported.stdout.trim().split('\n')).toHaveLength(6);

    // An ended run cannot be cancelled again: usage error, nothing changes.
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is cancelled: only a running or blocked run can be cancelled \[RUN_STATE\]/);

    const retried = await cli(['runs', 'retry', id, '--work']);
    expect(retried.code).toBe(0);
    expect(await h.runtime.store.requireRun(id)).toMatchObject({
      status: 'completed',
      counts: { total: 5, succeeded: 5, cancelled: 0 },
    });
    for (const d of some) expect(h.ws.deals.get(d.id)?.name).toBe('Cancelled then retried');
  }, 90_000);

  it('stops an import whose producer is still reading its file: what it held is cancelled, the rest is not read', async () => {
    const fifo = join(h.dir, 'slow.csv');
    execFileSync('mkfifo', [fifo]);
    const importing = cli(['import', fifo, '--op', 'deal.update', '-w', 'acme']);
    const out = createWriteStream(fifo);
    out.on('error', () => undefined); // the reader closes its end once it stops: EPIPE is expected
    const before = h.ws.stats.requests;
    const rows = deals()
      .slice(10, 20)
      .map((d) => [d.id, 'Never sent']);
    out.write(csv(['id', 'name'], rows));
    const run = await waitFor(
      async () => (await h.runtime.store.listRuns({ workspace: 'acme', limit: 1 })).runs.find((r) => r.source === fifo),
      'the import to create its run',
    );

    // `runs cancel` waits (up to its settle bound, 15 s) for the run's final count, and the
    // producer, blocked reading the FIFO, can only settle it once the next rows come: so the
    // cancel runs on while the test waits for it to be recorded and then writes them.
    const cancelling = cli(['runs', 'cancel', run.id]);
    await waitFor(
      async () => ((await h.runtime.store.requireRun(run.id)).status === 'cancelled' ? true : undefined),
      'the cancel to be recorded',
    );
    // The producer sees the cancel within its watch interval (0.5 s), at its next row.
    await sleep(2500);
    out.write(
      csv(
        ['id', 'name'],
        deals()
          .slice(20, 30)
          .map((d) => [d.id, 'Never read']),
      )
        .split('\n')
        .slice(1)
        .join('\n'),
    );
    out.end();
    const [cancelled, done] = await Promise.all([cancelling, importing]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(/status: cancelled/);
    expect(done.code).toBe(1);
    expect(done.stdout).toMatch(/status: cancelled/);
    const after = await h.runtime.store.requireRun(run.id);
    expect(after).toMatchObject({
      status: 'cancelled',
      producerDone: true,
      counts: { total: 10, queued: 0, cancelled: 10 },
    });
    expect((await resultsByRow(h, run.id)).map((r) => r.row)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    expect(h.ws.stats.requests).toBe(before);
  }, 60_000);

  it('a worker that takes a job of a cancelled run records its rows cancelled instead of sending them', async () => {
    const some = deals().slice(0, 3);
    const id = (
      await h.importFile(
        h.file(
          'late.csv',
          csv(
            ['id', 'name'],
            some.map((d) => [d.id, 'Late']),
          ),
        ),
        'deal.update',
      )
    ).id;
    // The cancel's own queue sweep is left out here: only the status changes, as when a
    // producer's job lands just after the sweep.
    expect(await h.runtime.store.cancelRun(id, 'cancelled mid-flight')).toBe(true);
    const before = h.ws.stats.requests;
    const pool = await h.startWorkers();
    const run = await h.waitForRun(id, 20_000, (r) => r.counts.queued === 0);
    await pool.close();
    expect(run).toMatchObject({ status: 'cancelled', counts: { cancelled: 3, succeeded: 0 } });
    expect(h.ws.stats.requests).toBe(before);
  }, 60_000);
});

describe("one owner of a run's life", () => {
  it('a retry whose corrected file is not UTF-8 exits 2 and leaves the run completed, not running', async () => {
    const d = deals()[25]!;
    const imported = await cli([
      'import',
      h.file(
        'r.csv',
        csv(
          ['id', 'name'],
          [
            [d.id, 'Fine'],
            ['del_missing', 'Nope'],
          ],
        ),
      ),
      '--op',
      'deal.update',
      '-w',
      'acme',
      '--work',
      '--json',
    ]);
    expect(imported.code).toBe(1);
    const { id } = JSON.parse(imported.stdout) as { id: string };
    const bad = join(h.dir, 'latin1.csv');
    writeFileSync(
      bad,
      Buffer.concat([
        Buffer.from(`crm_sync_run_id,crm_sync_row,id,name\n${id},2,del_missing,`),
        Buffer.from([0x43, 0x61, 0x66, 0xe9]),
        Buffer.from('\n'),
      ]),
    );
    const retried = await cli(['runs', 'retry', id, '--file', bad]);
    expect(retried.code).toBe(2);
    expect(retried.stderr).toMatch(/INPUT_ENCODING/);
    expect(await h.runtime.store.requireRun(id)).toMatchObject({
      status: 'completed',
      producerDone: true,
      counts: { total: 2, succeeded: 1, failed: 1, queued: 0 },
    });
  }, 60_000);
});

describe('cancelling a retry', () => {
  it('a retry still queueing when its run is cancelled records every row it took: none is left without a result', async () => {
    const { failed } = await import('../../src/runs/index.js');
    const { cancelRun, retryRun } = await import('../../src/lifecycle/index.js');
    const { store } = h.runtime;
    const queue = h.runtime.queue('acme');
    const run = await store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: 'many.csv',
      columns: ['id', 'name'],
    });
    const rows = Array.from({ length: 1200 }, (_, i) =>
      failed({ row: i + 1, line: i + 2 }, { code: 'CRM_TRANSIENT', message: 'gave up' }, { id: `del_${i}`, name: 'x' }),
    );
    await store.recordResults(run.id, rows, { fromQueue: false });
    await store.finishProducing(run.id);
    // No worker: the retry fills the queue to its mark and waits for room.
    const retrying = retryRun({ runId: run.id, queue, store, highWaterMark: 100 });
    await waitFor(
      async () => ((await store.requireRun(run.id)).counts.queued > 0 ? true : undefined),
      'the retry to queue rows',
    );
    await sleep(300);
    await cancelRun({ store, queueFor: () => queue, runId: run.id });
    await retrying;
    const after = await store.requireRun(run.id);
    expect(after.status).toBe('cancelled');
    expect(after.counts.total).toBe(1200);
    expect(after.counts.queued).toBe(0);
    expect(after.counts.cancelled + after.counts.failed).toBe(1200);
    expect(after.counts.cancelled).toBeGreaterThan(0);
    // Rows the retry had not taken yet keep their earlier failure.
    expect(after.counts.failed).toBeGreaterThan(0);
    const results = await resultsByRow(h, run.id);
    expect(results).toHaveLength(1200);
    const waiting = await queue.getJobs(['waiting', 'delayed', 'prioritized']);
    expect(waiting.filter((j) => j?.data.runId === run.id)).toEqual([]);
  }, 60_000);
});
