import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { LookupPassBoard } from '../../src/runs/index.js';
import { testRedis } from './redis-fixture.js';

const { redis, prefix, cleanup } = testRedis();
afterAll(cleanup);

let n = 0;
/** Two processes' views of one workspace's board (a workspace of its own per test). */
function boards(leaseMs = 6000): [LookupPassBoard, LookupPassBoard] {
  const workspace = `ws-${++n}`;
  return [
    new LookupPassBoard({ redis, prefix, workspace, leaseMs }),
    new LookupPassBoard({ redis, prefix, workspace, leaseMs }),
  ];
}

describe('LookupPassBoard (ask-, renew-, finish-lookup-pass)', () => {
  it('gives one pass at a time, remembers the earliest need of those who waited, and shares its snapshot', async () => {
    const [a, b] = boards();
    const first = await a.ask(1000, 'a');
    expect(first).toMatchObject({ kind: 'run', from: 1000 });
    const wait = await b.ask(500, 'b');
    expect(wait.kind).toBe('wait');
    expect(wait.kind === 'wait' && wait.ms).toBeGreaterThan(5000);
    expect(await a.renew('a')).toBe(true);
    expect(await b.renew('b')).toBe(false);

    expect(await a.finish('a', 0, Buffer.from('deals'))).toBe(true);
    expect(await b.snapshotMeta()).toEqual({ startedAt: first.kind === 'run' && first.startedAt, from: 1000 });
    expect((await b.snapshotBody())?.toString()).toBe('deals');
    // The next pass covers what the waiting process asked for (500), not only the later ask.
    expect(await b.ask(800, 'b')).toMatchObject({ kind: 'run', from: 500 });
    // A pass that saw nothing to share leaves the last snapshot as it was.
    expect(await b.finish('b', 0, undefined)).toBe(true);
    expect((await a.snapshotBody())?.toString()).toBe('deals');
    expect((await a.snapshotMeta())?.from).toBe(1000);
  });

  it('tells a waiter when the pass under way began; a before-value board is apart from the lookup board', async () => {
    const workspace = `ws-${++n}`;
    const lookup = new LookupPassBoard({ redis, prefix, workspace });
    const [a, b] = [0, 1].map(() => new LookupPassBoard({ redis, prefix, workspace, before: 'contacts' }));
    expect((await lookup.ask(0, 'l')).kind).toBe('run');
    const first = await a!.ask(0, 'a');
    expect(first.kind).toBe('run'); // the lookup's pass holds only the lookup board
    const wait = await b!.ask(0, 'b');
    expect(wait).toMatchObject({ kind: 'wait', passStartedAt: first.kind === 'run' && first.startedAt });
    expect(await a!.finish('a', 10_000, undefined)).toBe(true);
    const gap = await b!.ask(0, 'b');
    expect(gap.kind === 'wait' && gap.passStartedAt).toBeUndefined();
    expect(await lookup.snapshotMeta()).toBeUndefined();
  });

  it("stamps a run's first ask for before-values once: later callers get the first caller's time", async () => {
    const workspace = `ws-${++n}`;
    const [a, b] = [0, 1].map(() => new LookupPassBoard({ redis, prefix, workspace, before: 'deals' }));
    const one = await a!.runStart('run-1');
    expect(one.first).toBe(one.now);
    await sleep(5);
    const again = await b!.runStart('run-1');
    expect(again.first).toBe(one.first);
    expect(again.now).toBeGreaterThan(one.first);
    expect((await b!.runStart('run-2')).first).toBeGreaterThan(one.first);
  });

  it('keeps the gap after a pass before the next may start', async () => {
    const [a] = boards();
    expect((await a.ask(0, 'a')).kind).toBe('run');
    expect(await a.finish('a', 10_000, undefined)).toBe(true);
    const next = await a.ask(0, 'a');
    expect(next.kind).toBe('wait');
    expect(next.kind === 'wait' && next.ms).toBeGreaterThan(9000);
  });

  it('a pass whose lease ran out is taken over, and its holder can neither renew nor finish it', async () => {
    const [a, b] = boards(100);
    expect((await a.ask(0, 'a')).kind).toBe('run');
    await sleep(150);
    expect(await b.ask(0, 'b')).toMatchObject({ kind: 'run', from: 0 });
    expect(await a.renew('a')).toBe(false);
    expect(await a.finish('a', 0, Buffer.from('stale'))).toBe(false);
    expect(await a.snapshotBody()).toBeUndefined();
    expect(await b.finish('b', 0, Buffer.from('fresh'))).toBe(true);
    expect((await a.snapshotBody())?.toString()).toBe('fresh');
  });
});
