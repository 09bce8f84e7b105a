import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { cancelRun } from '../../src/lifecycle/index.js';
import type { WorkerPool } from '../../src/worker/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor, harnessArgs, startCli } from '../helpers/run-cli.js';

// Issue 31, item 1: a cancel stops a run at its next request, not at its next job. Rows of jobs a
// worker already took are recorded `cancelled` by the write fence; only requests already on the
// wire finish. The simulator counts every request it is sent (real HTTP, real Redis).

const CONCURRENCY = 4;
const ROWS = 200;

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function harness(): Promise<Harness> {
  h = await startHarness({
    records: ROWS,
    knownRateLimit: { max: 10, durationMs: 1000 },
    // Counts the CRM's requests exactly: no list reads of before-values (readBefore) among them.
    workspace: { rowsPerJob: 10, readBefore: false },
  });
  return h;
}

async function sending(h: Harness, requests: number): Promise<void> {
  const until = Date.now() + 20_000;
  while (h.ws.stats.requests < requests) {
    if (Date.now() > until) throw new Error('the run did not start sending');
    await sleep(20);
  }
}

async function startRun(concurrency = CONCURRENCY): Promise<{ h: Harness; id: string; pool: WorkerPool }> {
  const h = await harness();
  const rows = [...h.ws.deals.values()].map((d) => [d.id, `Renamed ${d.id}`]);
  const run = await h.importFile(h.file('rename.csv', csv(['id', 'name'], rows)), 'deal.update');
  const pool = await h.startWorkers({ concurrency });
  // Under way: every job slot holds a job of ten rows, most of them not sent yet.
  await sending(h, 12);
  return { h, id: run.id, pool };
}

describe('cancel stops at the next request', () => {
  it('after the cancel returns, at most `concurrency` requests reach the CRM; every unsent row ends cancelled', async () => {
    const { h, id } = await startRun();
    await cancelRun({ store: h.runtime.store, queueFor: (w) => h.runtime.queue(w), runId: id, reason: 'stop now' });
    const atCancel = h.ws.stats.requests;
    const run = await h.waitForRun(id, 20_000, (r) => r.counts.queued === 0);
    // Nothing trickles in later either (a job that is retried, a row handed off).
    await sleep(1500);
    const after = h.ws.stats.requests - atCancel;
    expect(after).toBeLessThanOrEqual(CONCURRENCY);
    expect(run.status).toBe('cancelled');
    const results = await resultsByRow(h, id);
    expect(results).toHaveLength(ROWS);
    const sent = results.filter((r) => r.status === 'succeeded').length;
    expect(run.counts).toMatchObject({ total: ROWS, queued: 0, succeeded: sent, cancelled: ROWS - sent });
    // A request for each row that succeeded, none for a cancelled one.
    expect(h.ws.stats.requests).toBe(sent);
    for (const r of results.filter((x) => x.status === 'cancelled')) expect(r.message).toBe('not sent: stop now');
  }, 60_000);

  it('a run cancelled with its jobs left in the queue (no sweep) sends none of them: each ends at its first fence call', async () => {
    // The worker read the run's status a moment ago (sending), so its next jobs of plain updates
    // go without that read (SyncWorker #stoppedRun): the fence's first call meets the cancel.
    const { h, id } = await startRun(1);
    expect(await h.runtime.store.cancelRun(id, 'stop here')).toBe(true);
    const atCancel = h.ws.stats.requests;
    const run = await h.waitForRun(id, 20_000, (r) => r.counts.queued === 0);
    await sleep(500);
    // At most the one request on the wire when the cancel landed.
    expect(h.ws.stats.requests - atCancel).toBeLessThanOrEqual(1);
    const results = await resultsByRow(h, id);
    const sent = results.filter((r) => r.status === 'succeeded').length;
    expect(run).toMatchObject({ status: 'cancelled', counts: { queued: 0, succeeded: sent, cancelled: ROWS - sent } });
    expect(ROWS - sent).toBeGreaterThan(100);
    expect(h.ws.stats.requests).toBe(sent);
  }, 60_000);

  it('runs cancel says what it removed, that the rest follows, and ends with the final counts', async () => {
    // Once the run is cancelled, every job a worker takes ends at its first row's fence call, so
    // a worker drains the waiting jobs in moments, and may take them all while the cancel is
    // still listing them: CI saw "removed from the queue: 0" with four job slots, and again with
    // one. So the worker takes no new job from here (its job in flight goes on), and what waits
    // is the cancel's to remove.
    const { h, id, pool } = await startRun(1);
    const worker = pool.active.get('acme')?.worker;
    expect(worker).toBeDefined();
    await worker!.pause(true);
    const out = await cliFor(() => h)(['runs', 'cancel', id, '--reason', 'wrong file']);
    expect(out.code).toBe(0);
    const removed = Number(/removed from the queue: (\d+) waiting rows?, recorded cancelled/.exec(out.stdout)?.[1]);
    expect(removed).toBeGreaterThan(0);
    expect(out.stdout).toContain('rows workers had taken: recorded cancelled at their next request');
    expect(out.stdout).toContain('rows the producer still holds or queues: recorded cancelled as it stops');
    const final = await h.waitForRun(id, 20_000, (r) => r.counts.queued === 0);
    // The summary printed is the run as it ended: the rows of the job in flight are counted too
    // (none more when that job had sent all its rows before the cancel reached it).
    expect(final.counts.cancelled).toBeGreaterThanOrEqual(removed);
    expect(final.counts.succeeded + final.counts.cancelled).toBe(ROWS);
    expect(out.stdout).toContain(`${final.counts.succeeded} succeeded`);
    expect(out.stdout).toContain(`, ${final.counts.cancelled} cancelled`);
    expect(out.stdout).not.toContain('still queued');
  }, 60_000);

  it("an import that works its own queue, cancelled from elsewhere, ends on the run's final counts", async () => {
    const h = await harness();
    const rows = [...h.ws.deals.values()].map((d) => [d.id, `Renamed ${d.id}`]);
    const file = h.file('work.csv', csv(['id', 'name'], rows));
    const run = harnessArgs(h, ['import', file, '--op', 'deal.update', '-w', 'acme', '--work', '--concurrency', '4']);
    const importing = startCli(run.args, run.env);
    await sending(h, 12);
    const { runs } = await h.runtime.store.listRuns({ workspace: 'acme', limit: 1 });
    const id = runs[0]!.id;
    await cancelRun({ store: h.runtime.store, queueFor: (w) => h.runtime.queue(w), runId: id });
    expect(await importing.exited).toBe(1);
    const final = await h.waitForRun(id, 20_000, (r) => r.counts.queued === 0);
    // Its last lines are the run as it ended, not the moment its status changed.
    expect(importing.stdout).toContain(`${final.counts.succeeded} succeeded`);
    expect(importing.stdout).toContain(`, ${final.counts.cancelled} cancelled`);
    expect(importing.stdout).not.toContain('still queued');
    expect(final.counts.succeeded + final.counts.cancelled).toBe(ROWS);
  }, 60_000);
});
