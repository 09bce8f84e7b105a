import { getEventListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { WaitWatch, newWaiter, type Waiter } from '../../src/rate/token-waits.js';

/** A watch whose ends are recorded in order, as SharedTokenBucket ends its waits. */
function recordingWatch() {
  const ended: Array<{ w: Waiter; how: 'expired' | 'aborted'; at: number; reason?: unknown }> = [];
  const watch = new WaitWatch({
    expire: (w) => {
      ended.push({ w, how: 'expired', at: Date.now() });
      watch.remove(w);
    },
    abort: (w, reason) => {
      ended.push({ w, how: 'aborted', at: Date.now(), reason });
      watch.remove(w);
    },
  });
  return { watch, ended };
}

const waiter = (withinMs?: number) =>
  newWaiter(withinMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + withinMs, () => undefined);

describe('the waits of the request budget, watched together', () => {
  it('each wait ends at its own deadline, a shorter one added later included; a wait removed before never does', async () => {
    const { watch, ended } = recordingWatch();
    const started = Date.now();
    const long = waiter(300);
    const removed = waiter(150);
    const short = waiter(80);
    const never = waiter();
    for (const w of [long, removed, short, never]) watch.add(w, undefined);
    watch.remove(removed);
    // Polled, not slept: a late event loop only makes the ends later, never out of order.
    while (ended.length < 2 && Date.now() - started < 10_000) await sleep(20);
    await sleep(100);
    expect(ended.map((e) => e.w)).toEqual([short, long]);
    expect(ended.every((e) => e.how === 'expired')).toBe(true);
    expect(ended[0]!.at - started).toBeGreaterThanOrEqual(79);
    expect(ended[1]!.at - started).toBeGreaterThanOrEqual(299);
  });

  it("a signal's abort ends every wait of that signal with its reason, and no other", async () => {
    const { watch, ended } = recordingWatch();
    const job = new AbortController();
    const other = new AbortController();
    const mine = [waiter(5000), waiter(5000), waiter()];
    const theirs = waiter(5000);
    for (const w of mine) watch.add(w, job.signal);
    watch.add(theirs, other.signal);
    const settledFirst = mine[0]!;
    watch.remove(settledFirst);
    job.abort(new Error('lock lost'));
    expect(ended.map((e) => e.w)).toEqual(mine.slice(1));
    expect(ended.every((e) => e.how === 'aborted' && (e.reason as Error).message === 'lock lost')).toBe(true);
    for (const w of [...mine.slice(1), theirs]) watch.remove(w);
    await sleep(10);
    expect(ended).toHaveLength(2);
  });

  it('a job attempt whose rows wait one after another adds one abort listener to its signal, not one a row', () => {
    const { watch } = recordingWatch();
    const job = new AbortController();
    for (let i = 0; i < 1000; i++) {
      const w = waiter(5000);
      watch.add(w, job.signal);
      watch.remove(w);
    }
    expect(getEventListeners(job.signal, 'abort')).toHaveLength(1);
  });
});
