import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SharedTokenBucket, claimLeadMs } from '../../src/rate/token-bucket.js';
import { CLAIM, NOTE_LATE } from '../../src/rate/token-bucket-scripts.js';
import { bucketKeys } from '../helpers/bucket-keys.js';
import { busiestWindow } from '../helpers/busiest-window.js';
import { testRedisAddress, testRedisUrlVia } from '../helpers/redis.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const { redis, bucketKey } = bucketKeys('bucket');

/** Takes `n` tokens through `bucket`, `parallel` at a time (rows of concurrent jobs); returns when each was granted. */
async function takeMany(bucket: SharedTokenBucket, n: number, parallel: number): Promise<number[]> {
  const times: number[] = [];
  let left = n;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (left > 0) {
        left--;
        await bucket.take();
        times.push(Date.now());
      }
    }),
  );
  return times;
}

/**
 * 200/s and eight takers, a 429 at the fifth take (after holding the event loop `holdMs`):
 * at the 429 the seven others hold send times up to 50 ms ahead. Returns the takes and `g`.
 */
async function pausedAtFifth(holdMs: number): Promise<{ taken: number; g: number }> {
  const key = bucketKey();
  const bucket = new SharedTokenBucket({ redis, key, initialRate: 200 });
  let taken = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (taken < 20) {
        await bucket.take();
        if (++taken !== 5) continue;
        const until = Date.now() + holdMs;
        while (Date.now() < until);
        await bucket.pause(100);
      }
    }),
  );
  return { taken, g: Number(await redis.hget(`${key}:rate`, 'g')) };
}

describe('claimLeadMs', () => {
  // Issue 42: a learned rate's send times claimed a whole reply time ahead had not come when a
  // loopback reply arrived, so nine rows in ten waited on a timer for theirs.
  it('a learned rate claims ahead only what a reply takes beyond half the lateness it allows', () => {
    expect(claimLeadMs(false, 0)).toBe(0);
    expect(claimLeadMs(false, 3.8)).toBe(0);
    expect(claimLeadMs(false, 50)).toBe(45);
  });

  it('a known limit claims the whole reply time ahead (its tokens are usable only briefly)', () => {
    expect(claimLeadMs(true, 3.8)).toBe(3.8);
    expect(claimLeadMs(true, 50)).toBe(50);
  });
});

describe('SharedTokenBucket', () => {
  it('processes sharing a key share one budget: no 1 s span holds more than the limit plus one burst', async () => {
    const key = bucketKey();
    const limit = { max: 40, durationMs: 1000 };
    // Three "processes": separate buckets, separate connections, one Redis key.
    const conns = [
      new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
      new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
      redis,
    ];
    const buckets = conns.map((c) => new SharedTokenBucket({ redis: c, key, limit }));
    try {
      const times = (await Promise.all(buckets.map((b) => takeMany(b, 40, 6)))).flat();
      expect(times).toHaveLength(120);
      // Bursts are a tenth of the limit; a budget per process would allow 3 × 40 in the first second.
      // (Plus 4 for timers that fire late on a busy machine and bunch grants due a moment apart.)
      expect(busiestWindow(times, 1000)).toBeLessThanOrEqual(40 + 4 + 4);
      // 120 tokens at 40/s take at least (120 - 4) / 40 s from the first grant to the last.
      expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(((120 - 4) / 40) * 1000 - 50);
    } finally {
      conns[0]!.disconnect();
      conns[1]!.disconnect();
    }
  }, 20_000);

  it('a pause (a 429) holds back every process sharing the key, and the rate after it is the limit', async () => {
    const key = bucketKey();
    const limit = { max: 20, durationMs: 1000 };
    const a = new SharedTokenBucket({ redis, key, limit });
    const b = new SharedTokenBucket({ redis, key, limit });
    await a.take();
    const pausedAt = Date.now();
    await a.pause(600);
    // `b` has never seen the 429: it learns the pause from Redis.
    await b.take();
    const first = Date.now();
    // Not before the pause's end on Redis's clock, as far as `b` can read that clock: within
    // half its claim's round trip (a loaded CI box: a first take 580 ms after, its claim ~40 ms).
    const clockError = b.clockErrorMs;
    expect(clockError).toBeLessThan(100);
    expect(first - pausedAt).toBeGreaterThanOrEqual(600 - 5 - clockError);
    const times = [first, ...(await takeMany(b, 9, 4))];
    // Paced after the pause (no burst of saved-up tokens): 10 at 20/s span at least 8 intervals
    // of 51 ms (the window with its margin, over 20). Not 9: a send time missed by a late timer
    // goes back to the budget, and the one claimed in its stead may share a moment with another,
    // as the limit's burst of a tenth (two here) allows. (A CI run saw 409 ms, 8 intervals.)
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(8 * 51 - 20);
  }, 10_000);

  it('takes given a send time still to come when a 429 arrives are served after the pause, nothing else asking', async () => {
    for (const limit of [{ max: 10, durationMs: 1000 }, undefined]) {
      const bucket = new SharedTokenBucket({ redis, key: bucketKey(), ...(limit ? { limit } : { initialRate: 10 }) });
      await bucket.take();
      // At 10/s the next two have send times ~100 and ~200 ms ahead, on their timers.
      const later = [bucket.take(), bucket.take()].map((p) => p.then(() => Date.now()));
      await sleep(20);
      const pausedAt = Date.now();
      await bucket.pause(300);
      const times = await Promise.race([Promise.all(later), sleep(3000).then(() => [])]);
      expect(times).toHaveLength(2);
      expect(Math.min(...times) - pausedAt).toBeGreaterThanOrEqual(300 - 5);
    }
  }, 10_000);

  it('a take whose job is cancelled rejects with the reason, and leaves the others their turn', async () => {
    const key = bucketKey();
    const bucket = new SharedTokenBucket({ redis, key, limit: { max: 2, durationMs: 1000 } });
    await takeMany(bucket, 2, 1); // the burst of a small limit is one token: the next waits ~0.5 s
    const cancel = new AbortController();
    const cancelled = bucket.take(cancel.signal);
    const other = bucket.take();
    cancel.abort(new Error('job lost'));
    await expect(cancelled).rejects.toThrow('job lost');
    await expect(other).resolves.toBe(true);
    await expect(bucket.take(AbortSignal.abort(new Error('already gone')))).rejects.toThrow('already gone');
  }, 10_000);

  it('a Redis error fails the waiting takes instead of hanging them', async () => {
    const broken = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
      lazyConnect: true,
      enableOfflineQueue: false,
    });
    const bucket = new SharedTokenBucket({ redis: broken, key: bucketKey(), limit: { max: 10, durationMs: 1000 } });
    await expect(bucket.take()).rejects.toThrow();
    broken.disconnect();
  });

  it('a take with a deadline resolves false once it passes without a token, and the next take is served in its turn', async () => {
    const key = bucketKey();
    const limit = { max: 2, durationMs: 1000 };
    const bucket = new SharedTokenBucket({ redis, key, limit });
    expect(await bucket.take(undefined, 5000)).toBe(true);
    expect(await bucket.take(undefined, 5000)).toBe(true);
    // The window is spent: the third send time is a second away, past a 100 ms deadline.
    const asked = Date.now();
    expect(await bucket.take(undefined, 100)).toBe(false);
    expect(Date.now() - asked).toBeLessThan(900);
    // A take without a deadline still gets its turn (the lost send time is never used late).
    await bucket.take();
    expect(Date.now() - asked).toBeGreaterThanOrEqual(900);
  }, 20_000);

  it('a wait called off gives its claimed send time to the next take: no token of the budget is lost', async () => {
    const key = bucketKey();
    // A wide margin: a timer late on a loaded machine would otherwise miss the send time
    // handed on (late by more than a third of the margin), and the take would claim another for
    // a reason of its own. 300 ms allowed only 100 ms, and a full CI run was 134 ms late once.
    const bucket = new SharedTokenBucket({ redis, key, limit: { max: 2, durationMs: 1000 }, marginMs: 900 });
    await bucket.take();
    await bucket.take();
    // The window is spent: the third send time is about a second away, claimed for this
    // wait (the send log keeps the last `max` grants: its newest entry is that send time).
    const log = () => redis.lrange(`${key}:log`, 0, -1);
    const spent = await log();
    const wait = bucket.reserve(undefined, 5000);
    let claimed = spent;
    while (claimed.at(-1) === spent.at(-1)) {
      await new Promise((s) => setTimeout(s, 5));
      claimed = await log();
    }
    wait.cancel();
    expect(await wait.granted).toBe(false);
    // The next take is served with that send time: no other one is claimed.
    expect(await bucket.take(undefined, 5000)).toBe(true);
    expect(await log()).toEqual(claimed);
    expect(bucket.usableForMs).toBeGreaterThan(0);
  }, 10_000);

  it('a token taken and then called off (its request not sent after all) goes back to the budget', async () => {
    const key = bucketKey();
    const bucket = new SharedTokenBucket({ redis, key, limit: { max: 2, durationMs: 1000 }, marginMs: 300 });
    const asked = Date.now();
    const wait = bucket.reserve(undefined, 5000);
    expect(wait.takenAt).toBeUndefined();
    expect(await wait.granted).toBe(true);
    // When it was taken, for the sender's "used within usableForMs" check.
    expect(wait.takenAt).toBeGreaterThanOrEqual(asked);
    expect(wait.takenAt).toBeLessThanOrEqual(Date.now());
    const granted = await redis.lrange(`${key}:log`, 0, -1);
    expect(granted).toHaveLength(1);
    wait.cancel();
    while (bucket.stats.givenBack < 1) await new Promise((s) => setTimeout(s, 5));
    // Out of the send log: the window counts only what may have been sent.
    expect(await redis.lrange(`${key}:log`, 0, -1)).toEqual([]);
    wait.cancel(); // a second call gives nothing back twice
    await new Promise((s) => setTimeout(s, 50));
    expect(bucket.stats.givenBack).toBe(1);
  }, 10_000);

  it('a process left idle with a spare send time gives it back once missed, with no later request to prompt it', async () => {
    const key = bucketKey();
    const bucket = new SharedTokenBucket({ redis, key, limit: { max: 50, durationMs: 1000 }, marginMs: 30 });
    const first = bucket.reserve();
    // Came while the first claim was out: the next claim asks for one more, for those to come.
    const second = bucket.reserve();
    await first.granted;
    await second.granted;
    expect(bucket.stats.claims).toBe(2);
    // The second claim's extra send time is a spare no request takes (none waits any more).
    await sleep(300);
    const log = await redis.lrange(`${key}:log`, 0, -1);
    expect(bucket.stats.missed).toBe(1);
    expect(bucket.stats.givenBack).toBe(1);
    // The log holds the two send times taken, not the spare's.
    expect(log).toHaveLength(2);
  }, 10_000);

  it('requests seen leaving late widen the margin: windows that long hold no more than max, and the growth is capped', async () => {
    const key = bucketKey();
    const limit = { max: 20, durationMs: 1000 };
    // No stall of this test's own loop may widen it meanwhile: the send delays alone are the point.
    const bucket = new SharedTokenBucket({ redis, key, limit, marginMs: 10, loopStallMs: () => 0 });
    expect(bucket.marginMs).toBe(10);
    // A loaded machine: requests reached the wire up to 40 ms after their turn.
    bucket.noteSendDelay(40);
    bucket.noteSendDelay(5); // a faster one since does not shrink what the slowest needs
    expect(bucket.marginMs).toBe(60);
    const times = await takeMany(bucket, 60, 6);
    // A request 40 ms late lands in the next window: 20 sends within 1000 + 40 ms would be 21 in
    // some CRM window. Taken within a third of the margin of their turn (20 ms), none is.
    expect(busiestWindow(times, limit.durationMs + 40 - 20)).toBeLessThanOrEqual(limit.max);
    bucket.noteSendDelay(10_000);
    expect(bucket.marginMs).toBe(100); // a tenth of the window at most
  }, 20_000);

  it('a stalling event loop widens the margin before any request is seen late, and it falls back once the stalls stop', async () => {
    const key = bucketKey();
    const limit = { max: 20, durationMs: 1000 };
    let stallMs = 0;
    const bucket = new SharedTokenBucket({ redis, key, limit, marginMs: 10, loopStallMs: () => stallMs });
    await bucket.take();
    expect(bucket.marginMs).toBe(10);
    // The process was held up 30 ms lately: the next claim's margin covers it 1.5 times over.
    stallMs = 30;
    const times = await takeMany(bucket, 30, 4);
    expect(bucket.marginMs).toBe(45);
    expect(busiestWindow(times, limit.durationMs + 30 - 15)).toBeLessThanOrEqual(limit.max);
    stallMs = 10_000;
    await bucket.take();
    expect(bucket.marginMs).toBe(100); // a tenth of the window at most
    stallMs = 0;
    await bucket.take();
    expect(bucket.marginMs).toBe(10);
  }, 20_000);

  it('a known limit is a ceiling in every window: no durationMs span of sends holds more than max, bursts and idle spells included', async () => {
    const key = bucketKey();
    const limit = { max: 40, durationMs: 500 };
    const conns = [
      new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
      new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
      redis,
    ];
    // A take resolves within the margin of its grant as long as a Redis reply takes under three
    // quarters of it, and the time is recorded a microtask later — unless the process is stalled
    // in between (a loaded CI box: 41 of 40 seen once at 20 ms). So the widest margin a known
    // limit allows (a tenth of the window; the default here would be 12.5 ms): a window over the
    // limit is then the log's failure, not the test's clock.
    const buckets = conns.map((c) => new SharedTokenBucket({ redis: c, key, limit, marginMs: limit.durationMs / 10 }));
    try {
      // A first window (the bucket's burst), steady sending, an idle spell that refills the
      // bucket, and sending again: the times each take resolved (the request would leave).
      const times = (await Promise.all(buckets.map((b) => takeMany(b, 30, 6)))).flat();
      await new Promise((r) => setTimeout(r, 120));
      times.push(...(await Promise.all(buckets.map((b) => takeMany(b, 30, 6)))).flat());
      expect(times).toHaveLength(180);
      // Counted from the recorded times, not from how long it took: a window holding max + 1
      // is a 429 from a CRM that counts a sliding window.
      expect(busiestWindow(times, limit.durationMs)).toBeLessThanOrEqual(limit.max);
    } finally {
      conns[0]!.disconnect();
      conns[1]!.disconnect();
    }
  }, 20_000);

  it('a request that left late moves its send-log entry to when it left: the grant max after it counts from there', async () => {
    const key = bucketKey();
    const limit = { max: 5, durationMs: 1000 };
    const bucket = new SharedTokenBucket({ redis, key, limit, marginMs: 20, loopStallMs: () => 0 });
    const log = async () => (await redis.lrange(`${key}:log`, 0, -1)).map(Number);
    const first = bucket.reserve();
    expect(await first.granted).toBe(true);
    const [granted] = await log();
    // The process stalls between the token and the wire (a GC, a descheduled process).
    const until = Date.now() + 300;
    while (Date.now() < until);
    first.sent(performance.timeOrigin + performance.now());
    for (let i = 1; i < limit.max; i++) {
      const w = bucket.reserve();
      expect(await w.granted).toBe(true);
      w.sent(performance.timeOrigin + performance.now());
    }
    for (let i = 0; i < 50 && bucket.stats.lateMoved < 1; i++) await sleep(10);
    expect(bucket.stats.late).toBeGreaterThanOrEqual(1);
    const moved = await log();
    expect(moved).toHaveLength(limit.max);
    // Moved by the stall (on Redis's clock; the clocks here agree within a few ms).
    expect(moved[0]! - granted!).toBeGreaterThan(290);
    const sixth = bucket.reserve();
    expect(await sixth.granted).toBe(true);
    const after = await log();
    // The grant `max` after the late one is a window plus the margin after it left, not after its grant.
    expect(after[after.length - 1]! - moved[0]!).toBeGreaterThanOrEqual(limit.durationMs + 20 - 0.01);
    expect(after[after.length - 1]! - granted!).toBeGreaterThan(limit.durationMs + 20 + 290);
  }, 20_000);

  it('NOTE_LATE only moves a log entry later, and leaves entries it does not find alone', async () => {
    const key = bucketKey();
    const logKey = `${key}:log`;
    await redis.rpush(logKey, '1000.000', '1200.000', '1400.000');
    // 1200 left at 1250 (moved), 1400 "at 1390" (earlier: left alone), 999 is not in the log.
    const moved = await NOTE_LATE.run(redis, { logKey }, {}, [
      '1200.000',
      '1250.500',
      '1400.000',
      '1390.000',
      '999.000',
      '2000.000',
    ]);
    expect(moved).toBe(1);
    expect(await redis.lrange(logKey, 0, -1)).toEqual(['1000.000', '1250.500', '1400.000']);
  });

  it('send times a stalled process missed go back to the budget (out of the send log), and windows still hold no more than max', async () => {
    const key = bucketKey();
    const limit = { max: 20, durationMs: 1000 };
    // A loaded machine: the event loop stalls 30 ms in every 100, so grants due meanwhile are
    // missed by more than a third of the margin and given up. The margin is held at 10 ms (the
    // stall watch told nothing), as in a process whose first stall has only just begun.
    const bucket = new SharedTokenBucket({ redis, key, limit, marginMs: 10, loopStallMs: () => 0 });
    const stall = setInterval(() => {
      const until = Date.now() + 30;
      while (Date.now() < until);
    }, 100);
    let times: number[];
    try {
      times = await takeMany(bucket, 40, 4);
    } finally {
      clearInterval(stall);
    }
    for (let i = 0; i < 50 && bucket.stats.givenBack < bucket.stats.missed; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(bucket.stats.missed).toBeGreaterThan(0);
    expect(bucket.stats.givenBack).toBe(bucket.stats.missed);
    // The log holds only times that were used: each is one a take resolved at (within the
    // margin's third, on clocks a few ms apart), none a missed one.
    const log = (await redis.lrange(`${key}:log`, 0, -1)).map(Number);
    const used = log.filter((g) => times.some((t) => Math.abs(t - g) <= 10));
    expect(used.length).toBeGreaterThanOrEqual(log.length - 2);
    expect(busiestWindow(times, limit.durationMs)).toBeLessThanOrEqual(limit.max);
  }, 20_000);

  describe('without a known limit (a learned rate)', () => {
    /** Redis's clock (ms), which the cut's cooldown reads. */
    async function redisNow(): Promise<number> {
      const [sec, usec] = await redis.time();
      return Number(sec) * 1000 + Number(usec) / 1000;
    }

    async function learned(key: string): Promise<{ rate: number; ceiling: number }> {
      const [rate, ceiling] = await redis.hmget(`${key}:rate`, 'rate', 'ceiling');
      return { rate: Number(rate), ceiling: Number(ceiling ?? 0) };
    }

    it('grows while requests wait on it, from where it started', async () => {
      const key = bucketKey();
      const bucket = new SharedTokenBucket({ redis, key, initialRate: 10 });
      await takeMany(bucket, 30, 8);
      // Always saturated (eight takers): the rate about doubles a second from 10.
      expect((await learned(key)).rate).toBeGreaterThan(15);
      expect((await learned(key)).ceiling).toBe(0);
    }, 10_000);

    it('before the first 429 it climbs fast (doubling a quarter second), after one at the gentler pace', async () => {
      const key = bucketKey();
      const bucket = new SharedTokenBucket({ redis, key, initialRate: 10 });
      // Saturated, the rate grows with the tokens granted: by ln 2 / 0.25 s = 2.8 a token cold
      // (~175 after 60), by 1 a token after a 429 (~70 at the old pace of about doubling a
      // second). A loaded box claims late now and then, and the time its TAT spends behind now
      // adds nothing (a Node 24 CI run measured 118): the bound sits between the two paces.
      await takeMany(bucket, 60, 8);
      const cold = await learned(key);
      expect(cold.rate).toBeGreaterThan(100);
      expect(cold.ceiling).toBe(0);
      // The climb's overshoot met a 429: from the cut on, about doubling a second (~30 more
      // after 30 tokens; the cold climb would add ~85).
      const cut = await bucket.pause(1);
      expect(cut).toBeLessThan(cold.rate);
      await takeMany(bucket, 30, 8);
      expect((await learned(key)).rate - cut).toBeLessThan(60);
    }, 10_000);

    it('a 429 cuts it once per episode (the first halves it), and every process, now or in a later run, goes at the cut rate', async () => {
      const key = bucketKey();
      const a = new SharedTokenBucket({ redis, key, initialRate: 40 });
      await a.take();
      // The first cut halves the rate and leaves the ceiling unknown: only a measure sets it.
      expect(await a.pause(10)).toBeCloseTo(20, 1);
      // More 429s of the same episode (requests sent before the cut) cut nothing more.
      expect(await a.pause(10)).toBeCloseTo(20, 1);
      const cut = await learned(key);
      expect(cut.rate).toBeCloseTo(20, 0);
      expect(cut.ceiling).toBe(0);
      // A process that starts later (another run, its own connection) reads the learned rate:
      // 10 requests at ~20/s, not at its initial 40/s.
      const other = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
      try {
        const b = new SharedTokenBucket({ redis: other, key, initialRate: 40 });
        const times = await takeMany(b, 10, 4);
        // (Still learning, it grows as they wait: well under 40/s all the same.)
        expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual((9 * 1000) / 30);
      } finally {
        other.disconnect();
      }
    }, 10_000);

    it('grants an event loop held up past (never sent) are not counted as sent: the measure counts requests', async () => {
      const key = bucketKey();
      const bucket = new SharedTokenBucket({ redis, key, initialRate: 40 });
      const sent = 10;
      for (let i = 0; i < sent; i++) {
        const granted = bucket.take();
        // The claim is on its way; its reply waits behind 30 ms of work, so the send time it
        // brings is more than 10 ms gone when it is read: not used, another is claimed.
        const until = Date.now() + 30;
        while (Date.now() < until);
        await granted;
      }
      // Every grant passed over was told to Redis with the claim that replaced it.
      expect(Number(await redis.hget(`${key}:rate`, 'g'))).toBe(sent);
    }, 10_000);

    it("a 429's pending grants (send times still ahead, which the pause holds back) are not counted as sent", async () => {
      const { taken, g } = await pausedAtFifth(0);
      // Every grant was sent but those the pause held back (the same claim's, given again after
      // it); counted as sent they were ~5 more, and the next measure would hold them.
      expect(g).toBeGreaterThanOrEqual(taken - 1);
      expect(g).toBeLessThanOrEqual(taken + 1);
    }, 10_000);

    it('a 429 that comes while the event loop is held up: the send times gone by, not sent, are not counted as sent', async () => {
      // A loaded box: the others' send times come and go while the fifth take works, their
      // timers not run yet when the 429 is told.
      const { taken, g } = await pausedAtFifth(40);
      // Their time had come on Redis's clock when PAUSE ran, so its `pending` did not take them
      // off `g`: counted as sent they were 7 more (34 against 27 taken), as a CI box's 429 left 5.
      expect(g).toBeGreaterThanOrEqual(taken - 1);
      expect(g).toBeLessThanOrEqual(taken + 1);
    }, 10_000);

    it('two 429s a second or more apart measure what the CRM accepted between them: that is the ceiling', async () => {
      const key = bucketKey();
      const bucket = new SharedTokenBucket({ redis, key, initialRate: 40 });
      await bucket.take();
      await bucket.pause(300); // the first cut: halved, 20/s
      // A second 429 of the episode, while the first one's pause holds the TAT ahead: the pause
      // is no grant, so it must not count as sent (6 more at 20/s, which made the measure high).
      await bucket.pause(300);
      const first = Date.now();
      // 20 more requests granted, then the next 429: about 20 accepted over the span.
      await takeMany(bucket, 20, 4);
      // A second or more after the first cut by Redis's clock, which the cut's cooldown reads.
      const cut = Number(await redis.hget(`${key}:rate`, 'cut'));
      while (Date.now() - first < 1000 || (await redisNow()) - cut < 1000) await new Promise((r) => setTimeout(r, 20));
      const span = (Date.now() - first) / 1000;
      const rate = await bucket.pause(1);
      const { ceiling } = await learned(key);
      // 20 sent, one of them (this 429) refused: 19 accepted over the span, rate 99 % of it.
      expect(ceiling).toBeGreaterThan(19 / (span + 0.1) - 0.5);
      expect(ceiling).toBeLessThan(20 / span + 0.5);
      expect(rate).toBeCloseTo(ceiling * 0.99, 1);
    }, 10_000);

    it("the measure leaves out the time from a pause's end to the first send after it: the CRM's capacity went unused then", async () => {
      const key = bucketKey();
      const bucket = new SharedTokenBucket({ redis, key, initialRate: 40 });
      await bucket.take();
      await bucket.pause(300); // the first cut: halved, 20/s; the CRM takes requests again 300 ms on
      const first = Date.now();
      // Nothing sent for 700 ms after the pause ended (jobs coming back to a worker far from its
      // Redis): a token bucket sat full, a window empty.
      await new Promise((r) => setTimeout(r, 1000));
      const resumed = Date.now();
      await takeMany(bucket, 20, 4);
      const cut = Number(await redis.hget(`${key}:rate`, 'cut'));
      while (Date.now() - resumed < 1000 || (await redisNow()) - cut < 1000)
        await new Promise((r) => setTimeout(r, 20));
      const idle = (resumed - first - 300) / 1000;
      const span = (Date.now() - first) / 1000;
      await bucket.pause(1);
      const { ceiling } = await learned(key);
      // 19 accepted over the span less the ~0.7 s idle (~15/s), not over the whole span (~9.5/s).
      expect(ceiling).toBeGreaterThan(19 / (span - idle + 0.1) - 0.5);
      expect(ceiling).toBeLessThan(20 / (span - idle - 0.1) + 0.5);
    }, 10_000);
    it('requests that come one by one are served from spare send times: a claim serves several', async () => {
      const key = bucketKey();
      // A rate far above the requests (1 ms apart): each take finds no other waiting, as the
      // rows of a busy worker often do between two claims.
      let claims = 0;
      const counted = new Proxy(redis, {
        get(target, name, receiver) {
          const value = Reflect.get(target, name, receiver) as unknown;
          if (name !== 'evalsha' || typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            if (args[1] === 3) claims++; // CLAIM is the only script of three keys it runs here
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
      const bucket = new SharedTokenBucket({ redis: counted, key, initialRate: 2000 });
      const takes = 30;
      for (let i = 0; i < takes; i++) {
        await bucket.take();
        await new Promise((r) => setTimeout(r, 1));
      }
      // One claim a take asked for that take alone (30 claims); spare send times serve the next.
      expect(claims).toBeLessThanOrEqual(takes / 2);
      // Spares never used are told to Redis with a later claim: not counted as sent, but for
      // those the last claim left (two at most, held for the next requests).
      await bucket.take();
      const g = Number(await redis.hget(`${key}:rate`, 'g'));
      expect(g).toBeGreaterThanOrEqual(takes + 1);
      expect(g).toBeLessThanOrEqual(takes + 3);
    }, 10_000);
  });

  describe('with Redis a network hop away (a delay proxy, 25 ms each way)', () => {
    // Issue 42: a send time claimed from Redis arrives half a round trip after Redis granted it.
    // Counted as lateness, a take alone at a time was never served (its first send time always
    // missed, given back, and granted again at Redis's now), and a learned rate's short horizon
    // was gone before any reply came.
    let proxy: TcpProxy;
    let far: Redis;
    beforeAll(async () => {
      const { host, port } = testRedisAddress();
      proxy = await startTcpProxy({ upstreamHost: host, upstreamPort: port, delayMs: 25 });
      far = new Redis(testRedisUrlVia(proxy.port));
    });
    afterAll(async () => {
      far.disconnect();
      await proxy.close();
    });

    /** `n` takes one after another, each given up (false) if not served within 3 s. */
    async function oneByOne(bucket: SharedTokenBucket, n: number): Promise<{ served: number; times: number[] }> {
      const times: number[] = [];
      let served = 0;
      for (let i = 0; i < n; i++) {
        if (await bucket.take(undefined, 3000)) {
          served++;
          times.push(Date.now());
        }
      }
      return { served, times };
    }

    it('a known limit serves takes one at a time, and no window of sends holds more than max', async () => {
      const key = bucketKey();
      const limit = { max: 10, durationMs: 1000 };
      const bucket = new SharedTokenBucket({ redis: far, key, limit });
      const { served, times } = await oneByOne(bucket, 15);
      expect(served).toBe(15);
      expect(busiestWindow(times, limit.durationMs)).toBeLessThanOrEqual(limit.max);
      // Side by side too (rows of concurrent jobs): every take served, the windows hold.
      const side = await takeMany(bucket, 12, 4);
      expect(side).toHaveLength(12);
      expect(busiestWindow([...times, ...side], limit.durationMs)).toBeLessThanOrEqual(limit.max);
    }, 30_000);

    it('a known limit claims spares for the takes that came while its last claim was out', async () => {
      const key = bucketKey();
      // How many send times each CLAIM asked for (its `n`: CLAIM is the call of 3 keys and 10 args).
      const asked: number[] = [];
      const counted = new Proxy(far, {
        get(target, name, receiver) {
          const value = Reflect.get(target, name, receiver) as unknown;
          if (name !== 'evalsha' || typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            const rest = args[2] as unknown[];
            if (args[1] === 3 && rest.length === 13) asked.push(Number(rest[5]));
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
      const limit = { max: 100, durationMs: 1000 };
      const bucket = new SharedTokenBucket({ redis: counted, key, limit, loopStallMs: () => 0 });
      // A first take, alone: the bucket learns how far away Redis is.
      expect(await bucket.take(undefined, 5000)).toBe(true);
      asked.length = 0;
      // A's claim goes out alone; B and C come while it is on its way (a round trip of 50 ms), so
      // the claim made for them asks for two more, for the rows that come during it.
      const first = [bucket.take(undefined, 5000), bucket.take(undefined, 5000), bucket.take(undefined, 5000)];
      expect(await Promise.all(first)).toEqual([true, true, true]);
      expect(asked[0]).toBe(1);
      expect(asked[1]).toBeGreaterThanOrEqual(4); // B and C (A too, had its time gone by) + 2
      // D and E, coming as rows do right after, are served (from those spares while not gone by).
      const next = [bucket.take(undefined, 5000), bucket.take(undefined, 5000)];
      expect(await Promise.all(next)).toEqual([true, true]);
    }, 30_000);

    // The write fence's call claims a row's send time in its own step (begin-update): here CLAIM
    // itself stands in for that call, with the keys and arguments carry() gives it.
    it('a send time claimed in another call (carry) is served from its answer, shares the send log with takes, and a call that claimed none loses nothing', async () => {
      const key = bucketKey();
      const limit = { max: 10, durationMs: 1000 };
      const bucket = new SharedTokenBucket({ redis: far, key, limit, loopStallMs: () => 0 });
      // A first take, alone: the bucket learns how far away Redis is (its first send time, claimed
      // at Redis's now, has gone by when the answer comes, and is given back).
      expect(await bucket.take(undefined, 5000)).toBe(true);
      const times: number[] = [Date.now()];
      const before = { ...bucket.stats };
      const carriedOnes = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const c = bucket.carry(undefined, 5000);
          if (c.claim) c.answered(await CLAIM.run(far, c.claim.keys, c.claim.args));
          expect(await c.wait.granted).toBe(true);
          times.push(Date.now());
        }
      };
      await carriedOnes(3);
      // Each of those claimed in its own call: the budget made none of its own, but for a send
      // time that came too late to use (a stalled loop on a loaded box: the CI run of 73164fc
      // missed 3 here), which the budget claims again itself. Sending it anyway would be the bug.
      const after = bucket.stats;
      console.log(`[token-bucket] carried 3 at 25 ms: ${JSON.stringify({ before, after })}`);
      expect(after.carried - before.carried).toBe(3);
      expect(after.claims - before.claims).toBeLessThanOrEqual(after.missed - before.missed);
      // Side by side with the budget's own takes (list pages beside rows): one send log.
      const [side] = await Promise.all([takeMany(bucket, 8, 2), carriedOnes(9)]);
      times.push(...side);
      expect(times).toHaveLength(21);
      expect(busiestWindow(times, limit.durationMs)).toBeLessThanOrEqual(limit.max);
      // The fence said no: the wait is called off, its call claimed nothing; the next is served.
      const refused = bucket.carry(undefined, 5000);
      refused.wait.cancel();
      refused.answered(undefined);
      expect(await refused.wait.granted).toBe(false);
      expect(await bucket.take(undefined, 5000)).toBe(true);
    }, 30_000);

    it('a learned rate serves takes one at a time', async () => {
      const key = bucketKey();
      const bucket = new SharedTokenBucket({ redis: far, key, initialRate: 20 });
      const { served } = await oneByOne(bucket, 10);
      expect(served).toBe(10);
    }, 30_000);
  });
});
