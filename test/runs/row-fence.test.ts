import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it, vi } from 'vitest';
import {
  RowFence,
  RunStore,
  earliestStamp,
  resendPlace,
  seqInWords,
  seqOf,
  type RowResult,
  type RowWriter,
} from '../../src/runs/index.js';
import { RunKeys } from '../../src/keys/index.js';
import { testRedis } from './redis-fixture.js';

/*
 * The write fence's rules, one race at a time, against real Redis: what each Lua script lets
 * through when two writers, a stale attempt or a retry meet on one row or one record.
 */
const { redis, prefix, cleanup } = testRedis();
const store = new RunStore({ redis, prefix });
const fence = new RowFence({ redis, prefix, workspace: 'acme', leaseMs: 400 });
afterAll(cleanup);

const deal = (id: string) => ({ resource: 'deals', id });
/** A row that writes the fields other rows of these tests write too. */
const both = { name: 'Acme', value: 10 };

async function runWithRows(rows: number): Promise<string> {
  const run = await store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'fence.csv' });
  await store.addQueued(run.id, rows);
  return run.id;
}

/** A job attempt holding its lock. */
async function attempt(runId: string, row: number, token = `tok-${row}`, round = 0): Promise<RowWriter> {
  const lockKey = `${prefix}:lock:${runId}:${row}`;
  await redis.set(lockKey, token);
  return { runId, row, round, lockKey, token };
}

const ok = (row: number, recordId = `d${row}`): RowResult => ({
  row,
  line: row + 1,
  status: 'succeeded',
  recordId,
  at: new Date().toISOString(),
});

describe('write order of one record', () => {
  it('an older row is superseded once a later row for the record was applied; the same row may be sent again', async () => {
    const runId = await runWithRows(3);
    const w1 = await attempt(runId, 1);
    const w3 = await attempt(runId, 3);
    const later = await fence.beginUpdate(w3, deal('order-a'), both);
    expect(later).toMatchObject({ kind: 'send', seq: seqOf(runId, 3), fields: both, writtenLater: [] });
    await fence.settleUpdate(deal('order-a'), seqOf(runId, 3), true);
    expect(await fence.beginUpdate(w1, deal('order-a'), both)).toMatchObject({
      kind: 'superseded',
      by: seqOf(runId, 3),
    });
    // A redelivery of row 3 itself (its result was never stored) is idempotent: allowed.
    expect((await fence.beginUpdate(w3, deal('order-a'), both)).kind).toBe('send');
  });

  it("a row waits while another row's write to the record is on the wire, and goes once it settles unapplied", async () => {
    const runId = await runWithRows(2);
    const w1 = await attempt(runId, 1);
    const w2 = await attempt(runId, 2);
    expect((await fence.beginUpdate(w1, deal('order-b'), both)).kind).toBe('send');
    const blocked = await fence.beginUpdate(w2, deal('order-b'), both);
    expect(blocked.kind).toBe('wait');
    // A 4xx proves row 1 was not applied: row 2 may go; once row 2 is applied, row 1 is superseded.
    await fence.settleUpdate(deal('order-b'), seqOf(runId, 1), false);
    expect((await fence.beginUpdate(w2, deal('order-b'), both)).kind).toBe('send');
    await fence.settleUpdate(deal('order-b'), seqOf(runId, 2), true);
    expect((await fence.beginUpdate(w1, deal('order-b'), both)).kind).toBe('superseded');
  });

  it('an in-flight lease that ran out counts as applied: its request may still land, so no older row follows it', async () => {
    const runId = await runWithRows(2);
    const w1 = await attempt(runId, 1);
    const w2 = await attempt(runId, 2);
    expect((await fence.beginUpdate(w2, deal('order-c'), both)).kind).toBe('send');
    // Row 2's worker vanished without settling. After the lease, row 1 must not overwrite it.
    await sleep(450);
    expect((await fence.beginUpdate(w1, deal('order-c'), both)).kind).toBe('superseded');
  });

  it('an applied update settles with its result in one call: the lease ends, and an older row is superseded after it', async () => {
    const runId = await runWithRows(2);
    const w1 = await attempt(runId, 1);
    const w2 = await attempt(runId, 2);
    const begin = await fence.beginUpdate(w2, deal('order-e'), both);
    if (begin.kind !== 'send') throw new Error('expected send');
    // Settled with the result even though the writer lost its lock meanwhile: the CRM holds row 2's value.
    await redis.set(w2.lockKey, 'another-worker');
    const stored = await store.recordFenced(runId, [ok(2)], {
      fences: [{ ...w2, settles: fence.settlement(deal('order-e'), begin.seq, true) }],
    });
    expect(stored.refused).toEqual([{ row: 2, reason: 'lock' }]);
    expect(await fence.beginUpdate(w1, deal('order-e'), both)).toMatchObject({
      kind: 'superseded',
      by: seqOf(runId, 2),
    });
  });

  it('rows of a later run order after every row of an earlier run', async () => {
    const older = await runWithRows(1);
    await sleep(5);
    const newer = await runWithRows(1);
    expect(seqOf(newer, 1) > seqOf(older, 999_999)).toBe(true);
    expect((await fence.beginUpdate(await attempt(newer, 1), deal('order-d'), both)).kind).toBe('send');
    await fence.settleUpdate(deal('order-d'), seqOf(newer, 1), true);
    expect((await fence.beginUpdate(await attempt(older, 1), deal('order-d'), both)).kind).toBe('superseded');
  });
});

describe('write order of one record, per field', () => {
  it('an older row still sends the fields no later row wrote, and leaves out the ones it did', async () => {
    const runId = await runWithRows(11);
    const valueRow = await attempt(runId, 1);
    const statusRow = await attempt(runId, 11);
    const later = await fence.beginUpdate(statusRow, deal('pf-a'), { name: 'Acme', status: 'won' }, ['name']);
    expect(later).toMatchObject({ kind: 'send', fields: { name: 'Acme', status: 'won' }, writtenLater: [] });
    await fence.settleUpdate(deal('pf-a'), seqOf(runId, 11), true);
    // Row 1 sets value, which row 11 never wrote: it is sent. Its name (required on a deal
    // update) goes with the value row 11 wrote, so row 11's name stays the latest.
    const older = await fence.beginUpdate(valueRow, deal('pf-a'), { name: 'Acme old', value: 5 }, ['name']);
    expect(older).toEqual({
      kind: 'send',
      seq: seqOf(runId, 1),
      fields: { name: 'Acme', value: 5 },
      writtenLater: [{ field: 'name', by: seqOf(runId, 11) }],
    });
  });

  it('a row whose every field a later row wrote is superseded, naming the fields', async () => {
    const runId = await runWithRows(3);
    const w3 = await attempt(runId, 3);
    expect((await fence.beginUpdate(w3, deal('pf-b'), { status: 'won', value: 9 })).kind).toBe('send');
    await fence.settleUpdate(deal('pf-b'), seqOf(runId, 3), true);
    expect(await fence.beginUpdate(await attempt(runId, 1), deal('pf-b'), { value: 1 })).toEqual({
      kind: 'superseded',
      by: seqOf(runId, 3),
      writtenLater: [{ field: 'value', by: seqOf(runId, 3) }],
    });
    // A row with one field of its own and one written later: only its own goes.
    const mixed = await fence.beginUpdate(await attempt(runId, 2), deal('pf-b'), { value: 2, owner_id: 'u1' });
    expect(mixed).toMatchObject({ kind: 'send', fields: { owner_id: 'u1' } });
  });

  it('a required field alone, written later, is superseded: a rename is never put back', async () => {
    const runId = await runWithRows(2);
    await fence.beginUpdate(await attempt(runId, 2), deal('pf-c'), { name: 'New' }, ['name']);
    await fence.settleUpdate(deal('pf-c'), seqOf(runId, 2), true);
    const older = await fence.beginUpdate(await attempt(runId, 1), deal('pf-c'), { name: 'Old' }, ['name']);
    expect(older.kind).toBe('superseded');
  });

  it('a lease that ran out counts its own fields as applied, not the record', async () => {
    const runId = await runWithRows(2);
    expect((await fence.beginUpdate(await attempt(runId, 2), deal('pf-d'), { status: 'won' })).kind).toBe('send');
    await sleep(450);
    const older = await fence.beginUpdate(await attempt(runId, 1), deal('pf-d'), { status: 'lost', value: 3 });
    expect(older).toMatchObject({ kind: 'send', fields: { value: 3 }, writtenLater: [{ field: 'status' }] });
  });

  it('a write settled unapplied leaves no field behind', async () => {
    const runId = await runWithRows(2);
    expect((await fence.beginUpdate(await attempt(runId, 2), deal('pf-e'), { status: 'won' })).kind).toBe('send');
    await fence.settleUpdate(deal('pf-e'), seqOf(runId, 2), false);
    const older = await fence.beginUpdate(await attempt(runId, 1), deal('pf-e'), { status: 'lost' });
    expect(older).toMatchObject({ kind: 'send', fields: { status: 'lost' }, writtenLater: [] });
  });

  it('a record remembers its fields as long as a run can be retried (retention), not a day', async () => {
    const runId = await runWithRows(1);
    await fence.beginUpdate(await attempt(runId, 1), deal('pf-life'), { value: 1 });
    await fence.settleUpdate(deal('pf-life'), seqOf(runId, 1), true);
    const pttl = await redis.pttl(`${prefix}:ws:{acme}:order:deals:pf-life`);
    // The default retention is 30 days; a retry on its last day must still meet later writes.
    expect(pttl).toBeGreaterThan(30 * 86_400_000);
  });

  it('run ids are stamped by Redis, so a host whose clock runs ahead cannot outrank later runs', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 60_000);
    let ahead: string;
    try {
      ahead = await runWithRows(1);
    } finally {
      vi.useRealTimers();
    }
    await sleep(5);
    const later = await runWithRows(1);
    expect(later > ahead).toBe(true);
    await fence.beginUpdate(await attempt(ahead, 1), deal('pf-skew'), { value: 1 });
    await fence.settleUpdate(deal('pf-skew'), seqOf(ahead, 1), true);
    expect((await fence.beginUpdate(await attempt(later, 1), deal('pf-skew'), { value: 2 })).kind).toBe('send');
  });

  it("a resend's place orders after earlier runs and names its own run in words", async () => {
    const earlier = await runWithRows(12);
    await sleep(5);
    const place = resendPlace(await store.serverTime('acme'), earlier);
    expect(seqOf(place, 11) > seqOf(earlier, 999_999)).toBe(true);
    expect(seqInWords(seqOf(place, 11))).toBe(`row 11 of run ${earlier} (resent)`);
    expect(seqInWords(seqOf(earlier, 11))).toBe(`row 11 of run ${earlier}`);
  });

  it("reads a record's order stored by an earlier version (one string) as a write of every field", async () => {
    const older = await runWithRows(1);
    await sleep(5);
    const newer = await runWithRows(1);
    const key = `${prefix}:ws:{acme}:order:deals:pf-legacy`;
    await redis.set(key, seqOf(newer, 1), 'PX', 60_000);
    expect((await fence.beginUpdate(await attempt(older, 1), deal('pf-legacy'), { value: 1 })).kind).toBe('superseded');
    // A row after it writes and turns the key into today's shape; the earlier version's write
    // still counts for every field.
    await sleep(5);
    const later = await runWithRows(1);
    expect((await fence.beginUpdate(await attempt(later, 1), deal('pf-legacy'), { value: 2 })).kind).toBe('send');
    await fence.settleUpdate(deal('pf-legacy'), seqOf(later, 1), true);
    expect(await redis.type(key)).toBe('hash');
    const again = await fence.beginUpdate(await attempt(older, 1), deal('pf-legacy'), { status: 'won' });
    expect(again).toMatchObject({ kind: 'superseded', by: seqOf(newer, 1) });
  });
});

describe('a stale or finished writer sends nothing', () => {
  it('refuses an attempt whose lock moved on, a row that was retried since, and a row that has its result', async () => {
    const runId = await runWithRows(3);
    const stale = await attempt(runId, 1, 'old');
    await redis.set(stale.lockKey, 'new'); // another worker took the job over
    expect(await fence.beginUpdate(stale, deal('stale-1'), both)).toEqual({ kind: 'refused', reason: 'lock' });
    expect(await fence.beginCreate(stale, 'fp-stale', { at: Date.now(), measured: true })).toEqual({
      kind: 'refused',
      reason: 'lock',
    });

    await store.recordResults(runId, [{ ...ok(2), status: 'failed', code: 'CRM_TRANSIENT', message: 'x' }]);
    await store.requeueRows(runId, [2], 7);
    expect(await fence.beginUpdate(await attempt(runId, 2, 't2', 0), deal('stale-2'), both)).toEqual({
      kind: 'refused',
      reason: 'round',
    });
    expect((await fence.beginUpdate(await attempt(runId, 2, 't2', 7), deal('stale-2'), both)).kind).toBe('send');

    await store.recordResults(runId, [ok(3)]);
    expect(await fence.beginUpdate(await attempt(runId, 3), deal('stale-3'), both)).toEqual({ kind: 'has-result' });
  });
});

describe('creates: one claim per row', () => {
  const clock = () => ({ at: Date.now(), measured: true });

  it('one create in flight per fingerprint; the deal, claim and result land together; another row naming that deal is a conflict', async () => {
    const runId = await runWithRows(2);
    const a = await attempt(runId, 1);
    const b = await attempt(runId, 2);
    const send = await fence.beginCreate(a, 'fp-1', clock());
    expect(send.kind).toBe('send');
    expect((await fence.beginCreate(b, 'fp-1', clock())).kind).toBe('wait');
    if (send.kind !== 'send') return;
    const conflict: RowResult = {
      row: 1,
      line: 2,
      status: 'failed',
      code: 'CREATE_CONFLICT',
      message: 'c',
      at: new Date().toISOString(),
    };
    expect(await fence.finishCreate(a, 'fp-1', 'deal-1', ok(1, 'deal-1'), conflict, send.marker)).toEqual({
      kind: 'recorded',
    });
    expect((await store.getResult(runId, 1))?.recordId).toBe('deal-1');
    expect(await fence.claimed(['deal-1', 'deal-x'])).toEqual(new Set(['deal-1']));
    // The lock went with the finish: row 2 may create now. An answer naming deal-1 is refused as a success.
    const second = await fence.beginCreate(b, 'fp-1', clock());
    expect(second.kind).toBe('send');
    if (second.kind !== 'send') return;
    const c2 = { ...conflict, row: 2 };
    expect(await fence.finishCreate(b, 'fp-1', 'deal-1', ok(2, 'deal-1'), c2, second.marker)).toMatchObject({
      kind: 'conflict',
      claimedBy: `${runId}/1`,
    });
    expect((await store.getResult(runId, 2))?.status).toBe('failed');
  });

  it('an attempt that lost its job leaves the deal it made in the marker, and the next attempt records that deal without a POST', async () => {
    const runId = await runWithRows(1);
    const first = await attempt(runId, 1, 'first');
    const sent = await fence.beginCreate(first, 'fp-2', clock());
    if (sent.kind !== 'send') throw new Error('expected send');
    await redis.set(first.lockKey, 'second'); // the job moved to another worker while the POST was out
    const failed: RowResult = {
      row: 1,
      line: 2,
      status: 'failed',
      code: 'CREATE_CONFLICT',
      message: 'c',
      at: new Date().toISOString(),
    };
    expect(await fence.finishCreate(first, 'fp-2', 'deal-2', ok(1, 'deal-2'), failed, sent.marker)).toEqual({
      kind: 'refused',
      reason: 'lock',
    });
    expect(await store.getResult(runId, 1)).toBeNull();
    const next = await fence.beginCreate({ ...first, token: 'second' }, 'fp-2', clock());
    expect(next).toMatchObject({ kind: 'doubt', marker: { dealId: 'deal-2', sentAt: sent.marker.sentAt } });
  });

  it("releasing removes only this attempt's marker; keeping it leaves the row in doubt", async () => {
    const runId = await runWithRows(1);
    const w = await attempt(runId, 1);
    const sent = await fence.beginCreate(w, 'fp-3', clock());
    if (sent.kind !== 'send') throw new Error('expected send');
    await fence.releaseCreate(w, 'fp-3', { ...sent.marker, sentAt: sent.marker.sentAt - 1 });
    expect((await fence.createsInDoubt(runId, [1])).has(1)).toBe(true);
    await fence.releaseCreate(w, 'fp-3', sent.marker, true);
    expect((await fence.createsInDoubt(runId, [1])).has(1)).toBe(true);
    // Kept as uncertain: the marker says when, so the next look waits for a newer pass, and a
    // marker stamped so is still one without a deal (the next attempt looks, it does not record).
    const again = await fence.beginCreate(w, 'fp-3', clock());
    if (again.kind !== 'doubt') throw new Error(`expected doubt, got ${again.kind}`);
    expect(again.marker.dealId).toBeUndefined();
    expect(again.marker.sentAt).toBe(sent.marker.sentAt);
    expect(again.marker.uncertainAt).toBeGreaterThanOrEqual(sent.marker.sentAt);
    expect(again.marker.uncertainAt).toBeLessThanOrEqual(again.now);
    await fence.releaseCreate(w, 'fp-3', sent.marker);
    expect((await fence.createsInDoubt(runId, [1])).size).toBe(0);
  });

  it("a marker whose key expired comes back from its copy beside the row's result: in doubt, never a blind send", async () => {
    const runId = await runWithRows(3);
    const markers = new RunKeys(prefix).creating({ id: runId, workspace: 'acme' });
    const gone = () => redis.del(markers);
    // Row 1: sent, its answer lost (stamped), then the markers' key expires (stood in for by DEL).
    const w = await attempt(runId, 1);
    const sent = await fence.beginCreate(w, 'fp-4', clock());
    if (sent.kind !== 'send') throw new Error('expected send');
    await fence.holdCreate(w, 'fp-4', 1000, sent.marker);
    await gone();
    expect((await fence.createsInDoubt(runId, [1, 2])).has(1)).toBe(true);
    const back = await fence.beginCreate(w, 'fp-4', clock());
    if (back.kind !== 'doubt') throw new Error(`expected doubt, got ${back.kind}`);
    // As it was: the send's time and the moment its answer was seen lost.
    expect(back.marker).toMatchObject({ sentAt: sent.marker.sentAt, exact: true });
    expect(back.marker.uncertainAt).toBeGreaterThanOrEqual(sent.marker.sentAt);
    // A run cancelled meanwhile still lets it look (the fence reads the copy too).
    await gone();
    await store.cancelRun(runId, 'cancelled by a test');
    expect((await fence.beginCreate(w, 'fp-4', clock())).kind).toBe('doubt');
    // Left uncertain, the copy stays for `runs retry`; proved not applied, it goes with the marker.
    await fence.releaseCreate(w, 'fp-4', sent.marker, true);
    await gone();
    expect((await fence.createsInDoubt(runId, [1])).has(1)).toBe(true);
    await fence.releaseCreate(w, 'fp-4', sent.marker);
    expect((await fence.createsInDoubt(runId, [1])).size).toBe(0);
    expect((await fence.beginCreate(w, 'fp-4', clock())).kind).toBe('refused'); // cancelled, nothing in doubt

    // Row 2: a job that lost its lock learned the deal; the copy keeps it for the job's next owner.
    const other = await runWithRows(2);
    const first = await attempt(other, 1, 'first');
    const out = await fence.beginCreate(first, 'fp-5', clock());
    if (out.kind !== 'send') throw new Error('expected send');
    await redis.set(first.lockKey, 'second');
    const failed: RowResult = { row: 1, line: 2, status: 'failed', code: 'CREATE_CONFLICT', message: 'c', at: '' };
    await fence.finishCreate(first, 'fp-5', 'deal-5', ok(1, 'deal-5'), failed, out.marker);
    await redis.del(new RunKeys(prefix).creating({ id: other, workspace: 'acme' }));
    const next = await fence.beginCreate({ ...first, token: 'second' }, 'fp-5', clock());
    expect(next).toMatchObject({ kind: 'doubt', marker: { dealId: 'deal-5', sentAt: out.marker.sentAt } });
    // Recorded, the doubt is over: neither marker nor copy is left.
    if (next.kind !== 'doubt') return;
    expect(
      await fence.finishCreate({ ...first, token: 'second' }, 'fp-5', 'deal-5', ok(1, 'deal-5'), failed, next.marker),
    ).toEqual({ kind: 'recorded' });
    expect((await fence.createsInDoubt(other, [1])).size).toBe(0);
  });
});

describe('the record clock', () => {
  it("keeps the lowest lower bound: a stamp run ahead of the CRM's clock does not hide a later on-time deal", async () => {
    const ws = new RowFence({ redis, prefix, workspace: 'record-clock', leaseMs: 400 });
    const run = await store.createRun({ workspace: 'record-clock', operation: 'deal.create', source: 'clock.csv' });
    await store.addQueued(run.id, 3);
    const runId = run.id;
    const failed: RowResult = { row: 0, line: 1, status: 'failed', code: 'CREATE_CONFLICT', message: 'c', at: '' };
    /** A create answered with a deal stamped `ahead` ms after Redis' clock at the answer. */
    async function answered(row: number, ahead: number): Promise<number> {
      const w = await attempt(runId, row);
      const sent = await ws.beginCreate(w, `fp-clock-${row}`, { at: Date.now(), measured: true });
      if (sent.kind !== 'send') throw new Error(`expected send, got ${sent.kind}`);
      const [sec, usec] = await redis.time();
      const stamp = { createdAt: Number(sec) * 1000 + Math.floor(Number(usec) / 1000) + ahead, resolutionMs: 1 };
      const done = await ws.finishCreate(
        w,
        `fp-clock-${row}`,
        `clock-deal-${row}`,
        ok(row),
        failed,
        sent.marker,
        undefined,
        stamp,
      );
      expect(done.kind).toBe('recorded');
      return sent.marker.sentAt;
    }
    await answered(1, 0);
    const onTime = await ws.recordClock();
    expect(onTime?.lo).toBeLessThanOrEqual(0);
    // A CRM that keeps its stamps strictly increasing runs ahead in a burst (the simulator does).
    // Before, this sample restarted the clock at its own bounds (lo ≥ 19): an on-time deal made
    // after a later send was then "surely older" than that send, and its lost create was sent again.
    await answered(2, 20);
    const afterBurst = await ws.recordClock();
    expect(afterBurst?.lo).toBe(onTime?.lo);
    expect(afterBurst?.hi).toBeGreaterThanOrEqual(20);
    const sentAt = await answered(3, 0);
    const clock = (await ws.recordClock())!;
    // An on-time deal made at the send is not before the earliest stamp the send allows.
    expect(earliestStamp(sentAt, clock)).toBeLessThan(sentAt);
    // The on-time sample narrows the upper bound again (it is what tells "surely after the send").
    expect(clock.hi).toBeLessThan(20);
    expect(clock.hi).toBeGreaterThanOrEqual(clock.lo);
  });
});
