import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS, Secret } from '../../src/config/index.js';
import { CrmClient } from '../../src/crm/index.js';
import { silentLogger } from '../../src/log/index.js';
import type { QueuedRow } from '../../src/queue/index.js';
import { DealLookup, DuplicateSafeCreate } from '../../src/worker/creates/index.js';
import { LookupPassBoard, RowFence, RunStore, type RowWriter } from '../../src/runs/index.js';
import { startSimulator } from '../../src/sim/index.js';
import type { DriftCheck } from '../../src/worker/drift-check.js';
import { RowSender, type RowSenderOptions } from '../../src/worker/row-sender.js';
import { SharedTokenBucket } from '../../src/rate/index.js';
import { testRedis } from '../runs/redis-fixture.js';

/*
 * Issue 31, item 13: an update is sent only once the write fence let it go and it has its rate
 * token; the two are asked side by side (two round trips in the time of one), and a token that
 * came too long before the fence's answer is taken anew, so the request leaves at its grant's
 * time. The wait holds the record's write lease, so it is bounded: past `rateWaitMs` the lease
 * is given back unused and the row waits its turn; a fence that says no calls the token's wait
 * off. Real Redis, the simulator over HTTP; the budget is the test's, to hold a token back at will.
 */
const { redis, prefix, cleanup } = testRedis();
const store = new RunStore({ redis, prefix });
const fence = new RowFence({ redis, prefix, workspace: 'acme', leaseMs: 5000 });
let sim: Awaited<ReturnType<typeof startSimulator>>;
let client: CrmClient;

beforeAll(async () => {
  sim = await startSimulator({
    port: 0,
    workspaces: [{ name: 'acme', apiKeys: ['k-acme'], records: 12, seed: 4, rateLimit: null }],
  });
  client = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl('acme'), apiKey: new Secret('k-acme') });
});
afterAll(async () => {
  client?.close();
  await sim?.close();
  await cleanup();
});

/** A budget that hands out a token only when the test says so (SharedTokenBucket's reserve, by hand). */
function heldBudget(usableForMs = 60_000) {
  const waiting: Array<() => void> = [];
  /** When the requests paced by its tokens left, as the sender told them (TokenWait.sent). */
  const sent: number[] = [];
  let reserved = 0;
  let cancelled = 0;
  return {
    waiting,
    sent,
    usableForMs,
    get reserved() {
      return reserved;
    },
    get cancelled() {
      return cancelled;
    },
    reserve(signal: AbortSignal | undefined, withinMs: number) {
      reserved++;
      let cancel = () => undefined as void;
      // takenAt is set on the object returned, as SharedTokenBucket's waits do.
      const wait = {
        granted: Promise.resolve(false),
        takenAt: undefined as number | undefined,
        cancel: () => cancel(),
        sent: (at: number) => void sent.push(at),
      };
      const granted = new Promise<boolean>((resolve, reject) => {
        const deadline = setTimeout(() => resolve(false), withinMs);
        waiting.push(() => {
          clearTimeout(deadline);
          wait.takenAt = Date.now();
          resolve(true);
        });
        cancel = () => {
          cancelled++;
          clearTimeout(deadline);
          resolve(false);
        };
        signal?.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
      });
      wait.granted = granted;
      return wait;
    },
    /** The budget's own wait, beside the fence (as SharedTokenBucket.carry when it has a spare). */
    carry(signal: AbortSignal | undefined, withinMs: number) {
      return { wait: this.reserve(signal, withinMs), claim: undefined, answered: () => undefined };
    },
  };
}

/** The write fence, counting the answers it has given (so a test knows the record is held). */
class WatchedFence extends RowFence {
  answered = 0;
  override async beginUpdate(...args: Parameters<RowFence['beginUpdate']>) {
    const answer = await super.beginUpdate(...args);
    this.answered++;
    return answer;
  }
}

function sender(
  budget: RowSenderOptions['budget'],
  rateWaitMs: number,
  watched = fence,
  drift?: DriftCheck,
): RowSender {
  const board = new LookupPassBoard({ redis, prefix, workspace: 'acme' });
  const settleMs = DEFAULTS.workspace.createSettleMs;
  const lookup = new DealLookup({ client, board, fence, pageSize: DEFAULTS.client.pageSize, minGapMs: settleMs });
  const creates = new DuplicateSafeCreate({ client, fence, lookup, settleMs, logger: silentLogger });
  return new RowSender({
    client,
    fence: watched,
    creates,
    logger: silentLogger,
    budget,
    rateWaitMs,
    ...(drift ? { drift } : {}),
  });
}

/** Row `row` of a run of its own, updating the simulator's deal number `deal`. */
async function writer(row: number, deal: number): Promise<{ w: RowWriter; r: QueuedRow; runId: string }> {
  const run = await store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'rate.csv' });
  await store.addQueued(run.id, 1);
  const w: RowWriter = { runId: run.id, row, round: 0, lockKey: `${prefix}:lock:${run.id}:${row}`, token: 't' };
  await redis.set(w.lockKey, w.token);
  const id = [...sim.workspace('acme').deals.keys()][deal]!;
  const r = { row, line: row + 1, payload: { op: 'deal.update', id, fields: { name: `Rate ${row}` } } } as QueuedRow;
  return { w, r, runId: run.id };
}

describe('an update is sent once the write fence let it go and it has its rate token', () => {
  it('holds the record while it waits for the token, and sends once it has it', async () => {
    const budget = heldBudget();
    const watched = new WatchedFence({ redis, prefix, workspace: 'acme', leaseMs: 5000 });
    const { w, r } = await writer(1, 0);
    const id = (r.payload as { id: string }).id;
    const before = sim.workspace('acme').stats.requests;
    const sending = sender(budget, 5000, watched).send(w, r, undefined);
    while (budget.waiting.length === 0 || watched.answered === 0) await new Promise((s) => setTimeout(s, 5));
    // The fence let it go: another row of the record waits for this write, and nothing was sent yet.
    const other = await writer(2, 0);
    expect((await fence.beginUpdate(other.w, { resource: 'deals', id }, { name: 'x' })).kind).toBe('wait');
    expect(sim.workspace('acme').stats.requests).toBe(before);
    const released = performance.timeOrigin + performance.now();
    budget.waiting[0]!();
    const out = await sending;
    expect(out).toMatchObject({ kind: 'result', result: { status: 'succeeded', recordId: id } });
    expect(sim.workspace('acme').stats.requests).toBe(before + 1);
    // The budget is told when the request left (its send log keeps a late one's real time).
    expect(budget.sent).toHaveLength(1);
    expect(budget.sent[0]).toBeGreaterThanOrEqual(released);
    expect(budget.sent[0]).toBeLessThanOrEqual(performance.timeOrigin + performance.now());
    expect(sim.workspace('acme').deals.get(id)?.name).toBe('Rate 1');
  });

  it('a token not had within rateWaitMs gives the lease back unused: the row waits, nothing is sent', async () => {
    const budget = heldBudget();
    const { w, r } = await writer(3, 1);
    const id = (r.payload as { id: string }).id;
    const before = sim.workspace('acme').stats.requests;
    const out = await sender(budget, 150).send(w, r, undefined);
    expect(out).toEqual({ kind: 'wait', ms: 0 });
    expect(sim.workspace('acme').stats.requests).toBe(before);
    expect(budget.sent).toEqual([]);
    // The record is free at once (the write settled unapplied), not after the 5 s lease.
    const other = await writer(4, 1);
    expect((await fence.beginUpdate(other.w, { resource: 'deals', id }, { name: 'y' })).kind).toBe('send');
  });

  it('an abort while waiting for the token ends the attempt as lost, and frees the record', async () => {
    const budget = heldBudget();
    const { w, r } = await writer(5, 2);
    const id = (r.payload as { id: string }).id;
    const abort = new AbortController();
    const sending = sender(budget, 5000).send(w, r, abort.signal);
    while (budget.waiting.length === 0) await new Promise((s) => setTimeout(s, 5));
    abort.abort(new Error('lock lost'));
    expect(await sending).toMatchObject({ kind: 'lost' });
    const other = await writer(6, 2);
    expect((await fence.beginUpdate(other.w, { resource: 'deals', id }, { name: 'z' })).kind).toBe('send');
  });

  it('a fence that says wait calls the token off: nothing sent, no token spent', async () => {
    const budget = heldBudget();
    const first = await writer(7, 3);
    const id = (first.r.payload as { id: string }).id;
    // Another row's write to the record is on the wire.
    expect((await fence.beginUpdate(first.w, { resource: 'deals', id }, { name: 'first' })).kind).toBe('send');
    const { w, r } = await writer(8, 3);
    const before = sim.workspace('acme').stats.requests;
    const out = await sender(budget, 5000).send(w, r, undefined);
    expect(out).toMatchObject({ kind: 'wait' });
    expect(budget.reserved).toBe(1);
    expect(budget.cancelled).toBe(1);
    expect(sim.workspace('acme').stats.requests).toBe(before);
  });

  it('a row whose before-values are still being read takes its token only once they are in', async () => {
    // The list read of before-values answers only when the test says (a pass of a long list).
    // Its pages take tokens of the same budget: a token the row held meanwhile would come
    // before theirs and be stale when the read ends.
    let answer: (values: Record<string, string>) => void = () => undefined;
    let asked = false;
    const slowRead = {
      freshValues: () => undefined,
      values: () =>
        new Promise<Record<string, string>>((resolve) => {
          asked = true;
          answer = resolve;
        }),
    } as unknown as DriftCheck; // only the two methods a plain row's before-value read calls
    const budget = heldBudget(50);
    const { w, r } = await writer(10, 5);
    const before = sim.workspace('acme').stats.requests;
    const sending = sender(budget, 5000, fence, slowRead).send(w, r, undefined);
    while (!asked) await new Promise((s) => setTimeout(s, 1));
    await new Promise((s) => setTimeout(s, 200)); // the fence has answered long since
    expect(budget.reserved).toBe(0);
    answer({ name: 'Before' });
    while (budget.waiting.length === 0) await new Promise((s) => setTimeout(s, 5));
    expect(sim.workspace('acme').stats.requests).toBe(before);
    budget.waiting[0]!();
    expect(await sending).toMatchObject({ kind: 'result', result: { status: 'succeeded' } });
    expect(budget.reserved).toBe(1);
    expect(budget.cancelled).toBe(0);
    expect(sim.workspace('acme').stats.requests).toBe(before + 1);
  });

  it('a token that came too long before the fence answered is taken anew before the request leaves', async () => {
    // usableForMs -1: a token given before the fence's answer is stale however soon that came.
    const budget = heldBudget(-1);
    const watched = new WatchedFence({ redis, prefix, workspace: 'acme', leaseMs: 5000 });
    const { w, r } = await writer(9, 4);
    const before = sim.workspace('acme').stats.requests;
    const sending = sender(budget, 5000, watched).send(w, r, undefined);
    while (budget.waiting.length === 0) await new Promise((s) => setTimeout(s, 1));
    budget.waiting[0]!();
    while (budget.waiting.length < 2) await new Promise((s) => setTimeout(s, 5));
    expect(sim.workspace('acme').stats.requests).toBe(before);
    budget.waiting[1]!();
    expect(await sending).toMatchObject({ kind: 'result', result: { status: 'succeeded' } });
    expect(budget.reserved).toBe(2);
    // The stale token was handed back (a known limit's send time goes back to the budget).
    expect(budget.cancelled).toBe(1);
    expect(sim.workspace('acme').stats.requests).toBe(before + 1);
  });

  it("with the workspace's budget, a row's send time is claimed in the fence's own call, and a row the fence holds back claims none", async () => {
    const key = `${prefix}:ws:{acme}:bucket`;
    const budget = new SharedTokenBucket({ redis, key, limit: { max: 50, durationMs: 1000 } });
    const rows = await Promise.all([20, 21, 22, 23, 24].map((row, i) => writer(row, 6 + i)));
    const before = sim.workspace('acme').stats.requests;
    const outs = await Promise.all(rows.map(({ w, r }) => sender(budget, 5000).send(w, r, undefined)));
    for (const out of outs) expect(out).toMatchObject({ kind: 'result', result: { status: 'succeeded' } });
    expect(sim.workspace('acme').stats.requests).toBe(before + 5);
    // Each fence call that let its row go brought the row's send time back with it.
    expect(budget.stats.carried).toBe(5);
    // A row whose record another write holds: the fence says wait, and no send time was claimed.
    const holder = await writer(25, 11);
    const id = (holder.r.payload as { id: string }).id;
    expect((await fence.beginUpdate(holder.w, { resource: 'deals', id }, { name: 'held' })).kind).toBe('send');
    const logged = await redis.llen(`${key}:log`);
    const held = await writer(26, 11);
    expect(await sender(budget, 5000).send(held.w, held.r, undefined)).toMatchObject({ kind: 'wait' });
    expect(budget.stats.carried).toBe(5);
    expect(await redis.llen(`${key}:log`)).toBe(logged);
    expect(sim.workspace('acme').stats.requests).toBe(before + 5);
  });
});
