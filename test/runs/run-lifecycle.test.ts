import { afterAll, describe, expect, it } from 'vitest';
import { RunStore, type RowResult } from '../../src/runs/index.js';
import { testRedis } from './redis-fixture.js';

const { redis, prefix, cleanup } = testRedis();
const store = new RunStore({ redis, prefix });
afterAll(cleanup);

const at = new Date(0).toISOString();
const ok = (row: number): RowResult => ({ row, status: 'succeeded', recordId: `r${row}`, at });
const bad = (row: number): RowResult => ({
  row,
  status: 'failed',
  httpStatus: 422,
  message: 'no',
  original: { id: `r${row}` },
  at,
});
const newRun = () => store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'f.csv' });

describe('run lifecycle guards', () => {
  it('a run whose last rows finished while blocked completes when resumed', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 2);
    await store.finishProducing(run.id);
    expect(await store.blockRun(run.id, 'key refused')).toBe(true);
    await store.recordResults(run.id, [ok(1), ok(2)]);
    expect((await store.requireRun(run.id)).status).toBe('blocked');
    expect(await store.resumeRun(run.id)).toBe(true);
    expect(await store.requireRun(run.id)).toMatchObject({ status: 'completed', counts: { succeeded: 2, queued: 0 } });
  });

  it('blocking leaves a run that already completed alone; resuming leaves a running run alone', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 1);
    await store.finishProducing(run.id);
    await store.recordResults(run.id, [ok(1)]);
    expect(await store.blockRun(run.id, 'key refused')).toBe(false);
    expect((await store.requireRun(run.id)).status).toBe('completed');
    const other = await newRun();
    expect(await store.resumeRun(other.id)).toBe(false);
    expect((await store.requireRun(other.id)).status).toBe('running');
  });

  it('a stale failure delivered after a success does not overwrite it', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 1);
    await store.recordResults(run.id, [ok(1)]);
    const counts = await store.recordResults(run.id, [bad(1)]);
    expect(counts).toMatchObject({ succeeded: 1, failed: 0, queued: 0 });
    expect((await store.getResult(run.id, 1))?.status).toBe('succeeded');
  });

  it('a retry that produces again keeps the run running until it finishes producing', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 3);
    await store.finishProducing(run.id);
    await store.recordResults(run.id, [bad(1), bad(2), bad(3)]);
    expect((await store.requireRun(run.id)).status).toBe('completed');
    await store.beginProducing(run.id);
    await store.requeueRows(run.id, [1], 1);
    await store.recordResults(run.id, [ok(1)]);
    expect((await store.requireRun(run.id)).status).toBe('running'); // more chunks may follow
    await store.requeueRows(run.id, [2, 3], 2);
    await store.recordResults(run.id, [ok(2), ok(3)]);
    expect((await store.finishProducing(run.id)).status).toBe('completed');
  });

  it('a run whose producer went silent mid-file is failed with the reason; live and finished producers are left alone', async () => {
    const stalled = await store.createRun({ workspace: 'quiet', operation: 'deal.update', source: 'big.csv' });
    await store.addQueued(stalled.id, 3);
    const finished = await store.createRun({ workspace: 'quiet', operation: 'deal.update', source: 'done.csv' });
    await store.addQueued(finished.id, 1);
    await store.finishProducing(finished.id);
    await store.blockRun(finished.id, 'key refused');
    // Nobody has been silent for an hour: nothing happens.
    expect(await store.failSilentProducers('quiet', 3_600_000)).toEqual([]);
    // Everyone has been silent for "minus one second": only the unfinished producer is failed.
    expect(await store.failSilentProducers('quiet', -1000)).toEqual([stalled.id]);
    const failed = await store.requireRun(stalled.id);
    expect(failed.status).toBe('failed');
    expect(failed.reason).toMatch(
      new RegExp(`reading big\\.csv stopped after 3 rows.*crm-sync runs resume ${stalled.id}`),
    );
    expect((await store.requireRun(finished.id)).status).toBe('blocked');
    // A heartbeat keeps a producer alive.
    const live = await store.createRun({ workspace: 'quiet', operation: 'deal.update', source: 'live.csv' });
    await new Promise((r) => setTimeout(r, 300));
    await store.touchProducer(live.id);
    // Silent for 200 ms fails a run created 300 ms ago, unless its heartbeat just came.
    expect(await store.failSilentProducers('quiet', 200)).toEqual([]);
  });
});
