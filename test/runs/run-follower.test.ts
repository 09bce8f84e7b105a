import { afterAll, describe, expect, it } from 'vitest';
import { RunStore, runReads, runWhenDone, type RunRecord } from '../../src/runs/index.js';
import { testRedis } from './redis-fixture.js';

/** The one way a process follows a run's record: read every `everyMs` until it ends. */
const { redis, prefix, cleanup } = testRedis();
const store = new RunStore({ redis, prefix });
afterAll(cleanup);

const newRun = () => store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'follow.csv' });

describe('runReads', () => {
  it('yields the first read at once, then each read, and ends with the read that is no longer running', async () => {
    const run = await newRun();
    const seen: RunRecord['status'][] = [];
    for await (const r of runReads(store, run.id, { everyMs: 20 })) {
      seen.push(r.status);
      if (seen.length === 3) await store.cancelRun(run.id, 'enough');
    }
    expect(seen.slice(0, 3)).toEqual(['running', 'running', 'running']);
    expect(seen.at(-1)).toBe('cancelled');
    expect(seen.length).toBe(4);
  });

  it('follows while `going` holds, stops on the signal, and runWhenDone answers the last read', async () => {
    const run = await newRun();
    const stop = new AbortController();
    let reads = 0;
    for await (const r of runReads(store, run.id, { everyMs: 10, going: () => true, signal: stop.signal })) {
      expect(r.id).toBe(run.id);
      if (++reads === 5) stop.abort();
    }
    expect(reads).toBe(5);
    setTimeout(() => void store.setStatus(run.id, 'completed'), 50);
    expect((await runWhenDone(store, run.id, { everyMs: 10 })).status).toBe('completed');
    await expect(runWhenDone(store, 'no-such-run', { everyMs: 10 })).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
  });
});
