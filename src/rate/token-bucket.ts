import type { RedisClient } from '../redis/index.js';
import { DEFAULTS, getWorkspace, resolveSettings, type Config, type Resolved } from '../config/index.js';
import { requestBudgetKey } from '../keys/index.js';
import {
  CLAIM,
  PAUSE,
  NOTE_LATE,
  RELEASE,
  claimKeys,
  type CarriedClaim,
  type ClaimArgs,
  type ClaimKeys,
  type Claimed,
} from './token-bucket-scripts.js';
import { recentLoopStallMs } from './loop-stalls.js';
import { WaitWatch, newWaiter, type Slot, type TokenWait, type Waiter } from './token-waits.js';

export interface SharedTokenBucketOptions {
  redis: RedisClient;
  /** The workspace's bucket key, shared by all its worker processes. */
  key: string;
  /**
   * The known limit: requests allowed per window. Default: none — the rate is learned, shared
   * by the workspace's processes and remembered between runs under `rateKey`.
   */
  limit?: { max: number; durationMs: number };
  /** Where a learned rate lives (no expiry). Default `<key>:rate`. */
  rateKey?: string;
  /** The rate a workspace with nothing learned yet starts from (requests/s). Default DEFAULTS.rateLimit (10). */
  initialRate?: number;
  /** How far ahead send times are claimed. Default 1000 ms with a known limit, 50 ms learning. */
  horizonMs?: number;
  /** Most send times claimed in one call. Default DEFAULTS.rateLimit (64). */
  maxBatch?: number;
  /**
   * With a known limit: how late a request may leave after its granted send time (the event
   * loop, the Redis reply). The limit's window is kept this much longer than `durationMs`, and a
   * send time missed by more is given up (a new one is claimed), so that no `durationMs` window
   * holds more than `max` sends. Default 2 % of `durationMs`, 5 to 50 ms. It grows, up to a
   * tenth of `durationMs`, while requests are seen leaving later than that (noteSendDelay) or
   * the process's event loop stalls for longer (`loopStallMs`).
   */
  marginMs?: number;
  /**
   * This process's longest recent event-loop stall (ms): a send time due during a stall is
   * sent that late. Default recentLoopStallMs (perf_hooks, the last ten seconds).
   */
  loopStallMs?: () => number;
}

/** Send delays noted within this long set the margin; older ones are forgotten. */
const SEND_DELAY_MEMORY_MS = 10_000;
/** The margin covers the longest recent send delay this many times over. */
const SEND_DELAY_COVER = 1.5;
/** The margin never grows past this share of the limit's window. */
const MAX_MARGIN_SHARE = 0.1;

/** 429s within this long of a cut come from requests sent before it: they cut nothing more. */
const CUT_COOLDOWN_MS = 1000;
/** Two 429s at most this far apart measure the CRM's rate between them (PAUSE). */
const MEASURE_SPAN_MS = 10_000;
/**
 * Learning, before the workspace's first 429: the rate doubles every this many ms. A cold run
 * loses every request short of the CRM's rate while it climbs (from initialRate, 10/s, to 50/s
 * doubling a second took 2.3 s), and an overshoot costs no more than one 429 episode: no burst,
 * so the 429s are the requests in flight when the CRM's first one comes back.
 */
const COLD_CLIMB_MS = 250;
/** A learned rate never falls below this (requests/s): the budget must not stall a workspace. */
const MIN_RATE = 0.5;

/** Learning, a spare send time this far gone is not used: a burst would follow. */
const LEARNING_LATE_MS = 10;
/**
 * Learning, a claim asks for up to this many send times per request waiting: the rest stay spare
 * for the requests that come while it is on its way. With rows in flight on many jobs a claim
 * found ~3 waiting (0.32 claims a row, bench/throughput.ts), and each claim is a Redis round trip
 * of the worker's CPU (bench/RESULTS.md, issue 42). Spares only where the rate is dense: all the
 * send times of a claim fall within LEARNING_LATE_MS (#claimSize).
 */
const CLAIM_AHEAD = 3;
/**
 * Learning, spares only while send times are at most this far apart (ms): a rate of 1,000/s and
 * more, where a spare nobody takes costs the workspace a millisecond of its rate. Near a CRM's
 * rate (a cold climb passes 100–150/s) a spare not taken is a send time lost to every process
 * and a TAT held ahead as if there were demand (CLAIM's climb): there a claim asks for the
 * requests waiting only, as before.
 */
const SPARE_SPACING_MS = 1;
/**
 * A request that left more than this share of the margin after its send time has its send-log
 * entry moved (#sent): a quarter (5 ms of the default 20) notes ~1 request in 100 on a quiet box.
 */
const LATE_NOTE_SHARE = 0.25;
/** A clock sample older than this gives way to any newer one (clocks drift apart). */
const CLOCK_SAMPLE_MS = 10_000;
/**
 * How fast the reply-time and round-trip estimates follow a new sample: at once half-way up (a
 * slower Redis must not cost missed send times for long), a tenth of the way down.
 */
const RISE = 0.5;
const FALL = 0.1;

/**
 * The workspace's request budget, one for all its worker processes (docs/architecture.md,
 * "Rate limits"), at a known limit or at a rate it learns from 429s: every CRM request, row
 * or list page, takes a token before it is sent. The
 * requests waiting in this process share one Redis call (a batch of send times, given out in
 * order), so the budget costs a fraction of a command per request however rows share jobs.
 * A known limit is a ceiling in every window: no `durationMs` span holds more than `max` sends
 * (the send log in CLAIM), paced with bursts of at most a tenth of it. A learned rate allows
 * no burst; it starts where the workspace's last run left it (the rate lives in Redis).
 */
export class SharedTokenBucket {
  readonly #o: Resolved<SharedTokenBucketOptions, 'initialRate' | 'maxBatch' | 'loopStallMs'>;
  #interval: number;
  #tolerance: number;
  readonly #horizon: number;
  /** The limit's window plus the margin (0 while learning: no send log). */
  #window: number;
  #margin: number;
  /** The margin when no request is seen leaving late (ms). */
  readonly #baseMargin: number;
  /** The longest send delay noted lately, and when (local ms). */
  #slowest = { ms: 0, at: 0 };
  readonly #waiting: Waiter[] = [];
  /** The waits' deadlines and abort signals. */
  readonly #watch = new WaitWatch({
    expire: (w) => this.#end(w),
    abort: (w, reason) => this.#end(w, reason),
  });
  /** Send times claimed but not handed out (their waiter went away), local epoch ms. */
  #spare: Slot[] = [];
  /**
   * Redis's clock minus this process's (ms), from the claim with the shortest round trip lately:
   * a grant is sent at its own time on Redis's clock, however late the reply that carried it.
   */
  #clock: { offset: number; error: number; at: number } | undefined;
  /**
   * How long a claim's reply takes to arrive after Redis read its clock (ms, on this process's
   * clock), and a claim's whole round trip: a Redis a network hop away is half a round trip and
   * more behind. Send times are claimed this far ahead (CLAIM's `lead`), so a reply is never
   * late by its own way back; a request that waits on another round trip beside its token
   * (reserve's `afterRoundTrip`) is given a send time no sooner than that one answers.
   */
  #replyMs = 0;
  #roundTripMs = 0;
  #claiming = false;
  #retry: NodeJS.Timeout | undefined;
  /** No request waits, and spares are left: pumps when the first of them is missed (#expireSpares). */
  #expiry: NodeJS.Timeout | undefined;
  /** Known limit: send times missed (never to be used), to give back (#release). */
  #missedSlots: number[] = [];
  #releasing = false;
  /**
   * Known limit: send times this process missed, and how many of them went back to the budget;
   * the budget's own claims (CLAIM calls), and claims other calls carried and answered (carry);
   * requests seen leaving late, and the send-log entries moved for them (#sent). Logs, tests.
   */
  readonly stats = { missed: 0, givenBack: 0, claims: 0, carried: 0, late: 0, lateMoved: 0 };
  /** Known limit: late requests' send times, as granted and as sent (Redis's clock), to note (NOTE_LATE). */
  #late: number[] = [];
  #noting = false;
  /**
   * Learning: send times granted (counted in Redis's `g`) that this process will not send, not
   * yet told to Redis. The next CLAIM or PAUSE takes them off `g`, so the CRM's rate a 429
   * measures counts requests sent, not grants a late event loop let pass (a CI run measured a
   * ceiling of 20.4 where the CRM had accepted at most 19.8 a second).
   */
  #unused = 0;
  /** A 429 this process saw: send times before this are not used (local epoch ms). */
  #pausedUntil = 0;
  /**
   * Learning: the grants of claims answered after a 429 that it caught unsent (Redis clock), until
   * PAUSE says from when its episode counted pending (#judge): those at or before it are told as
   * unused (#judgeCaught).
   */
  #caught: number[] = [];
  /** Learning: PAUSE's `judge` for the episode in force (Redis clock); undefined until one answers. */
  #judge: number | undefined;
  /** Waits given a send time still to come (their slot's timer runs). */
  readonly #scheduled = new Set<Waiter>();
  /** Learning: the spacing of the send times of the last claim that showed it (ms; 0: not yet seen). */
  #spacingMs = 0;
  /** Known limit: requests that began to wait while the claim now out was on its way. */
  #cameWhileClaiming = 0;

  readonly #keys: ClaimKeys;

  constructor(options: SharedTokenBucketOptions) {
    this.#o = resolveSettings(options, {
      initialRate: DEFAULTS.rateLimit.initialRate,
      maxBatch: DEFAULTS.rateLimit.maxBatch,
      loopStallMs: recentLoopStallMs,
    });
    const { limit } = options;
    // Learning, the interval comes from Redis (0 says so), and no burst is allowed: above an
    // unknown limit a burst is only more 429s.
    this.#baseMargin = limit ? (options.marginMs ?? Math.min(50, Math.max(5, limit.durationMs * 0.02))) : 0;
    this.#margin = this.#window = this.#interval = this.#tolerance = 0;
    this.#setMargin(this.#baseMargin);
    // Learning, other processes' slots already granted still go after a 429: a short horizon.
    this.#horizon = options.horizonMs ?? (limit ? 1000 : 50);
    this.#keys = claimKeys(options.key, options.rateKey);
  }

  /** The margin in force (ms): the base, or more while requests leave late. */
  get marginMs(): number {
    return this.#margin;
  }

  /**
   * How far this process's reading of Redis's clock may be off (ms: half the round trip of the
   * claim it was sampled from; 0 before any). Send times are kept on Redis's clock within it.
   */
  get clockErrorMs(): number {
    return this.#clock?.error ?? 0;
  }

  /**
   * A request left `ms` after it was handed to the HTTP client (the client's own time to the
   * wire: a loaded event loop, socket queueing). With a known limit the margin grows to cover
   * the longest such delay of the last SEND_DELAY_MEMORY_MS, so that sends bunched by a busy
   * machine still fit the CRM's windows; it falls back once they stop.
   */
  noteSendDelay(ms: number): void {
    if (!this.#o.limit) return;
    const now = Date.now();
    if (ms >= this.#slowest.ms || now - this.#slowest.at > SEND_DELAY_MEMORY_MS) this.#slowest = { ms, at: now };
    this.#fitMargin();
  }

  /**
   * The margin for the longest lateness seen lately: a request's own way to the wire
   * (noteSendDelay) or a stall of the event loop, which holds up whatever send time falls in
   * it. The stall is read at every claim, so a loaded box widens the margin before its first
   * late request bunches against the next ones (a CI run counted 51 in a window of 50 so).
   */
  #fitMargin(): void {
    const { limit } = this.#o;
    if (!limit) return;
    const slowest = Date.now() - this.#slowest.at > SEND_DELAY_MEMORY_MS ? 0 : this.#slowest.ms;
    const late = Math.max(slowest, this.#o.loopStallMs());
    const wanted = Math.min(limit.durationMs * MAX_MARGIN_SHARE, SEND_DELAY_COVER * late);
    const margin = Math.max(this.#baseMargin, wanted);
    if (margin !== this.#margin) this.#setMargin(margin);
  }

  #setMargin(margin: number): void {
    const { limit } = this.#o;
    if (!limit) return;
    this.#margin = margin;
    this.#window = limit.durationMs + margin;
    // Paced at the rate the window allows, so the log rarely has to hold a request back.
    this.#interval = this.#window / limit.max;
    this.#tolerance = (Math.ceil(limit.max / 10) - 1) * this.#interval;
  }

  /**
   * Resolves true when this request may be sent (its token taken); rejects when `signal`
   * aborts. With `withinMs`, gives up once that has passed without a token and resolves false
   * (none was taken; a send time already claimed for it is lost, never reused late). The waits'
   * deadlines share one timer (WaitWatch): cheap enough for every row.
   */
  take(signal?: AbortSignal, withinMs?: number): Promise<boolean> {
    return this.reserve(signal, withinMs).granted;
  }

  /**
   * As take, and the wait can be called off: `cancel()` ends it unserved (granted resolves
   * false) and gives its send time, when one was already claimed for it and has not come, to
   * the next request that waits; called after the token was taken (its request will not be sent
   * after all), a known limit's send time goes back to the budget (#giveBack). So a request may
   * start waiting for its token while it waits for something else (the write fence), and lose
   * nothing of the budget when that says no. `afterRoundTrip`: that something else is a Redis
   * round trip begun now, so with a known limit no send time due before it answers is given to
   * this wait (it would be stale by then: usableForMs); sooner ones serve other waits.
   */
  reserve(signal?: AbortSignal, withinMs?: number, afterRoundTrip = false): TokenWait {
    if (signal?.aborted) {
      const refused = newWaiter(Number.POSITIVE_INFINITY, () => undefined);
      refused.done = true;
      refused.reject(signal.reason);
      return refused;
    }
    const now = Date.now();
    const w = newWaiter(
      withinMs === undefined ? Number.POSITIVE_INFINITY : now + withinMs,
      (x) => this.#cancel(x),
      (x, at) => this.#sent(x, at),
    );
    // Known limit: its token is used only within usableForMs of its grant, and not before the
    // other round trip answers; a send time due sooner is better left to another request.
    if (afterRoundTrip && this.#o.limit) w.notBefore = now + this.#roundTripMs - this.usableForMs / 2;
    this.#watch.add(w, signal);
    this.#waiting.push(w);
    if (this.#claiming) this.#cameWhileClaiming++;
    this.#pump();
    return w;
  }

  #cancel(w: Waiter): void {
    // Taken, and its request will not be sent after all: a known limit's send time goes back to
    // the budget as a missed one does.
    if (w.taken) {
      this.#giveBack(w.taken);
      w.taken = undefined;
      this.#release();
      return;
    }
    if (w.done) return;
    w.done = true;
    const { slot } = w;
    this.#leave(w);
    // A send time claimed for this wait and not come yet serves the next one.
    if (slot) {
      this.#spare.unshift(slot);
      this.#pump();
    }
    w.resolve(false);
  }

  /**
   * Ends a wait from outside: its deadline (resolved false), or its signal's abort (rejected with
   * the signal's reason, always set once a signal aborted).
   */
  #end(w: Waiter, reason?: unknown): void {
    w.done = true;
    this.#leave(w);
    if (reason === undefined) w.resolve(false);
    else w.reject(reason);
  }

  /** Ends a wait unserved: out of the queue, its slot's timer stopped, no longer watched. */
  #leave(w: Waiter): void {
    clearTimeout(w.timer);
    w.timer = undefined;
    w.slot = undefined;
    this.#scheduled.delete(w);
    const i = this.#waiting.indexOf(w);
    if (i >= 0) this.#waiting.splice(i, 1);
    this.#watch.remove(w);
  }

  /**
   * How long after it resolved a token may still be used (ms): a request that could not leave
   * within this of its grant takes a new one. Known limit: a third of the margin, as for the
   * timer itself (#missed), so the log's windows hold. Learning: no bound, as for a late timer —
   * a learned rate has no window to keep, and a token thrown away would count as a send in the
   * CRM's rate that pause-tokens measures.
   */
  get usableForMs(): number {
    return this.#o.limit ? this.#margin / 3 : Number.POSITIVE_INFINITY;
  }

  /**
   * The CRM answered 429: no process of the workspace sends before `ms` from now, and a learned
   * rate is cut. Returns the learned rate after it (requests/s; 0 with a known limit).
   */
  async pause(ms: number): Promise<number> {
    const now = Date.now();
    // A new episode: what it catches is judged by its own PAUSE (an earlier episode's grants left
    // unjudged, its PAUSE failing, stay counted as sent).
    if (now >= this.#pausedUntil) {
      this.#judge = undefined;
      this.#caught = [];
    }
    this.#pausedUntil = Math.max(this.#pausedUntil, now + ms);
    const caught = this.#holdBack();
    const learning = this.#o.limit ? '0' : '1';
    const unused = this.#takeUnused();
    try {
      const { rate, judge } = await PAUSE.run(
        this.#o.redis,
        { tatKey: this.#keys.tatKey, rateKey: this.#keys.rateKey },
        {
          pauseMs: ms,
          tolerance: this.#tolerance.toFixed(3),
          learning,
          cooldownMs: CUT_COOLDOWN_MS,
          minRate: MIN_RATE,
          measureSpanMs: MEASURE_SPAN_MS,
          unused,
        },
        caught.map((t) => t.toFixed(3)),
      );
      if (!this.#o.limit) {
        this.#judge = judge;
        this.#judgeCaught();
      }
      return rate;
    } catch (err) {
      this.#unused += unused;
      throw err;
    }
  }

  /**
   * A 429 told (pause): the send times in hand that the pause covers are not used. The waits
   * given one queue again at once, first in line. Learning, the episode's first PAUSE takes the
   * grants ahead of its now off `g` (its `pending`); those at or before it that were not sent
   * (spares, timers a busy event loop had not run yet) are this process's to tell: returned (the
   * Redis times of all it caught), for the PAUSE that tells the 429 to judge in the same step,
   * before its measure reads `g`. Counted as sent, a loaded CI box's 429 left 5 of them in the
   * next measure (32 against 27); told with a later call, after the episode's count of what was
   * sent, they came off the next measure instead (at 20 ms the rate settled 2 % lower).
   */
  #holdBack(): number[] {
    const caught = this.#spare.map((s) => s.granted);
    this.#spare = [];
    const held = [...this.#scheduled].filter((w) => w.slot!.at < this.#pausedUntil);
    held.sort((a, b) => a.slot!.at - b.slot!.at);
    for (const w of held) {
      caught.push(w.slot!.granted);
      clearTimeout(w.timer);
      w.timer = w.slot = undefined;
      this.#scheduled.delete(w);
    }
    this.#waiting.unshift(...held);
    // Their turn comes when the pause ends (the pump's retry), asked by nothing else.
    if (held.length > 0) this.#pump();
    return this.#o.limit ? [] : caught;
  }

  /**
   * Learning: the grants of a claim's reply that came after the 429 (#caught) that PAUSE counted
   * as sent (at or before its judge) are told as unused; those after it it took off `g` itself.
   * Judged once PAUSE has answered, exactly, on Redis's clock: an estimate of it from the round
   * trip counted some twice.
   */
  #judgeCaught(): void {
    const judge = this.#judge;
    if (judge === undefined || this.#caught.length === 0) return;
    for (const granted of this.#caught) if (granted <= judge) this.#unused++;
    this.#caught = [];
  }

  /** Hands out spare send times, then claims more for whoever still waits (one call at a time). */
  #pump(): void {
    const now = Date.now();
    // A send time unused for longer than one interval (known limit: the margin) is gone: using
    // it would make a burst, or put more than `max` sends in a window. A known limit's goes back
    // to the budget (#release).
    this.#spare = this.#spare.filter((s) => {
      if (s.at < this.#pausedUntil) {
        // A claim's reply that came after the 429 was told: caught, as #holdBack's are.
        if (!this.#o.limit) this.#caught.push(s.granted);
        return false;
      }
      if (!this.#missed(s, now)) return true;
      this.#giveBack(s);
      return false;
    });
    this.#judgeCaught();
    this.#release();
    this.#fitMargin();
    // In order, each wait the first spare send time it can use (not before its notBefore).
    for (let i = 0; i < this.#waiting.length && this.#spare.length > 0;) {
      const w = this.#waiting[i]!;
      const j = w.notBefore === 0 ? 0 : this.#spare.findIndex((s) => s.at >= w.notBefore);
      if (j < 0) {
        i++;
        continue;
      }
      this.#waiting.splice(i, 1);
      this.#schedule(w, this.#spare.splice(j, 1)[0]!);
    }
    this.#expireSpares(now);
    if (this.#waiting.length === 0 || this.#claiming || this.#retry) return;
    if (now < this.#pausedUntil) {
      // The 429's pause is also in Redis (or on its way there): ask again when it is over.
      this.#retryIn(this.#pausedUntil - now);
      return;
    }
    this.#claiming = true;
    const n = this.#claimSize();
    this.#cameWhileClaiming = 0;
    const asked = Date.now();
    const unused = this.#takeUnused();
    this.stats.claims++;
    CLAIM.run(this.#o.redis, this.#keys, this.#claimArgs(n, unused))
      .then((claimed) => this.#claimed(asked, claimed, n))
      .catch((err: unknown) => {
        this.#unused += unused;
        // Redis refused or is away: the requests waiting now fail as any Redis step of a row does.
        for (const w of this.#waiting.splice(0)) this.#settle(w, err);
      })
      .finally(() => {
        this.#claiming = false;
        this.#pump();
      });
  }

  /**
   * A wait whose send time the caller's own Redis call claims (`claim`, for the write fence's
   * begin-update: the row's send time in the step that lets it go), so a row waits one round
   * trip for both, not a claim out and then its own (at 100 ms each way a job slot took 1.8 round
   * trips a row beside the fence, 1.3 with the claim in it: 22.4 → 29.9 rows/s at 1 × 8,
   * bench/RESULTS.md, issue 42). The call's answer goes to
   * `answered`: the send time it claimed, or undefined (the call failed, or the fence said no and
   * claimed none: cancel the wait first). A spare send time or a 429's pause serves the wait the
   * budget's own way (`claim` undefined), beside the call as reserve's afterRoundTrip does.
   */
  carry(signal: AbortSignal | undefined, withinMs: number): CarriedWait {
    const now = Date.now();
    if (signal?.aborted || this.#spare.length > 0 || now < this.#pausedUntil || this.#retry)
      return { wait: this.reserve(signal, withinMs, true), claim: undefined, answered: () => undefined };
    const w = newWaiter(
      now + withinMs,
      (x) => this.#cancel(x),
      (x, at) => this.#sent(x, at),
    );
    this.#watch.add(w, signal);
    this.#fitMargin();
    const unused = this.#takeUnused();
    // A known limit's carried claim is the row's own; a dense learned rate's brings spares for
    // the next rows, which then go with no claim at all: a claim in every row's fence call is
    // Redis work a row at 2,000 rows/s, where spares make it one in CLAIM_AHEAD.
    const n = this.#o.limit ? 1 : this.#claimSize(1);
    const claim: CarriedClaim = { keys: this.#keys, args: this.#claimArgs(n, unused) };
    let answered = false;
    return {
      wait: w,
      claim,
      answered: (claimed) => {
        if (answered) return;
        answered = true;
        if (claimed) {
          this.stats.carried++;
          this.#claimed(now, claimed, n);
        } else this.#unused += unused;
        // First in line for the send time it brought (a missed one goes back; it then waits its turn).
        if (!w.done) this.#waiting.unshift(w);
        this.#pump();
      },
    };
  }

  /** What a claim of `n` asks (claim-tokens' ARGV, begin-update's claim). */
  #claimArgs(n: number, unused: number): ClaimArgs {
    return {
      interval: this.#interval.toFixed(6),
      tolerance: this.#tolerance.toFixed(3),
      n,
      horizon: this.#horizon,
      startRate: this.#o.initialRate,
      window: this.#window.toFixed(3),
      // Not a setting: 0 tells the claim the limit is unknown (learned instead).
      max: this.#o.limit?.max ?? 0,
      unused,
      lead: claimLeadMs(this.#o.limit !== undefined, this.#replyMs).toFixed(3),
      climbMs: COLD_CLIMB_MS,
    };
  }

  /** A claim of `n` asked at `asked` answered: its send times become spares, in order. */
  #claimed(asked: number, { wait, now: redisNow, offsets }: Claimed, n: number): void {
    // Offsets are from Redis's now: placed on this process's clock through the offset between
    // the two, not from when the reply came (a reply held up in a busy event loop would send its
    // whole batch late, and late sends bunch up against on-time ones).
    const answered = Date.now();
    const base = redisNow - this.#learnClock(asked, answered, redisNow);
    this.#replyMs = follow(this.#replyMs, Math.max(0, answered - base));
    this.#roundTripMs = follow(this.#roundTripMs, answered - asked);
    for (const off of offsets) this.#spare.push({ at: base + off, granted: redisNow + off });
    // (Asked for more and given one: the next send time lies past the horizon.)
    if (offsets.length > 1) this.#spacingMs = (offsets[offsets.length - 1]! - offsets[0]!) / (offsets.length - 1);
    else if (offsets.length === 1 && n > 1) this.#spacingMs = this.#horizon;
    if (offsets.length === 0 && !this.#retry) this.#retryIn(wait);
  }

  /**
   * How many send times a claim asks for: one per request waiting, and with a learned rate dense
   * enough, spares for those that come while it is on its way (CLAIM_AHEAD), as many as fall
   * within LEARNING_LATE_MS of the first: a spare no request takes is gone that soon, told to
   * Redis as unused, so spares never hold the workspace's send times for long nor far ahead; and
   * only at a rate of SPARE_SPACING_MS or denser (a rate of 50/s gets none). A known limit's
   * spares are the requests that came while the last claim was out: a spare missed holds a place
   * in the send log until it goes back in a call of its own (#release).
   */
  #claimSize(waiting = Math.min(this.#waiting.length, this.#o.maxBatch)): number {
    // Known limit: as many again as came while the last claim was out, the rows that will start
    // waiting during this one. Claims go one at a time, so each such row waited for the claim out
    // and then its own: at 100 ms each way a row took 2.7 round trips where its path has 1.3
    // (bench/RESULTS.md, the fourteenth session). A spare none takes is missed and given back
    // (#release), as any missed send time is: the log's windows hold either way.
    if (this.#o.limit) return Math.min(this.#o.maxBatch, waiting + this.#cameWhileClaiming);
    if (this.#spacingMs > SPARE_SPACING_MS) return waiting;
    // Not seen yet: the first claim asking for spares shows it (the horizon bounds what it gets).
    const dense = this.#spacingMs > 0 ? 1 + Math.floor(LEARNING_LATE_MS / this.#spacingMs) : Infinity;
    return Math.min(this.#o.maxBatch, waiting * CLAIM_AHEAD, Math.max(waiting, dense));
  }

  /**
   * A send time this process will not use. A known limit's is given back (#release), not lost;
   * a learned rate's is only not counted as sent (#unused).
   */
  #giveBack(slot: Slot): void {
    if (!this.#o.limit) {
      this.#unused++;
      return;
    }
    this.stats.missed++;
    this.#missedSlots.push(slot.granted);
  }

  /**
   * A request left at `at` (local ms) on the send time `w` took. The log's windows allow a send a
   * third of the margin late (usableForMs) and leave the rest for the way to the CRM; a request
   * held up longer after its token (a stalled or descheduled process, the HTTP client's own
   * work: up to 18 ms on a quiet box, bench/RESULTS.md) would bunch against the grants `max`
   * after it. Its log entry moves to when it left, so those grants count from there; one
   * claimed before the note lands is not held back by it (the margin still covers that).
   */
  #sent(w: Waiter, at: number): void {
    const slot = w.taken;
    if (!this.#o.limit || !slot) return;
    const late = at - slot.at;
    if (late <= this.#margin * LATE_NOTE_SHARE) return;
    this.stats.late++;
    this.#late.push(slot.granted, slot.granted + late);
    this.#noteLate();
  }

  /** Tells Redis the late sends noted (one call at a time; a failed call only loses the notes). */
  #noteLate(): void {
    if (this.#late.length === 0 || this.#noting) return;
    const pairs = this.#late.splice(0);
    this.#noting = true;
    NOTE_LATE.run(
      this.#o.redis,
      { logKey: this.#keys.logKey },
      {},
      pairs.map((t) => t.toFixed(3)),
    )
      .then((n) => {
        this.stats.lateMoved += n;
      })
      .catch(() => undefined)
      .finally(() => {
        this.#noting = false;
        this.#noteLate();
      });
  }

  /**
   * Gives back the missed send times (RELEASE): out of the send log, and the TAT back one
   * interval each, so a process whose timers fire late (a loaded machine) does not lose them
   * from the limit. A failed call only loses them, as before: nothing is sent on them.
   */
  #release(): void {
    if (this.#missedSlots.length === 0 || this.#releasing || !this.#o.limit) return;
    const times = this.#missedSlots.splice(0);
    this.#releasing = true;
    RELEASE.run(
      this.#o.redis,
      this.#keys,
      { interval: this.#interval.toFixed(6) },
      times.map((t) => t.toFixed(3)),
    )
      .then((n) => {
        this.stats.givenBack += n;
      })
      .catch(() => undefined)
      .finally(() => {
        this.#releasing = false;
        this.#release();
      });
  }

  /**
   * A process left idle with spare send times (claimed for rows that went another way meanwhile)
   * gives them back once they are missed, not at its next request, which may be minutes off: a
   * known limit's spare holds its place in the workspace's send log till then, one request fewer
   * in that window for every process. Unref'd: a timer for a spare never keeps a process up.
   */
  #expireSpares(now: number): void {
    if (this.#expiry || this.#waiting.length > 0 || this.#spare.length === 0) return;
    const first = Math.min(...this.#spare.map((s) => s.at));
    this.#expiry = setTimeout(
      () => {
        this.#expiry = undefined;
        this.#pump();
      },
      Math.max(1, Math.ceil(first + this.#missedAfter() - now) + 1),
    ).unref();
  }

  #takeUnused(): number {
    const n = this.#unused;
    this.#unused = 0;
    return n;
  }

  #retryIn(ms: number): void {
    this.#retry = setTimeout(
      () => {
        this.#retry = undefined;
        this.#pump();
      },
      Math.max(1, Math.ceil(ms)),
    );
  }

  /**
   * The waiter sends at its slot, unless a 429 came meanwhile or the slot was missed: then it
   * queues again. A slot already come is used at once, with no timer (at full speed most are).
   */
  #schedule(w: Waiter, slot: Slot): void {
    const now = Date.now();
    const wait = slot.at - now;
    if (wait <= 0 && this.#usable(slot, now)) return this.#take(w, slot);
    w.slot = slot;
    this.#scheduled.add(w);
    w.timer = setTimeout(
      () => {
        w.timer = undefined;
        w.slot = undefined;
        this.#scheduled.delete(w);
        const now = Date.now();
        if (this.#usable(slot, now)) return this.#take(w, slot);
        if (now >= this.#pausedUntil) this.#giveBack(slot);
        this.#waiting.unshift(w);
        this.#pump();
      },
      Math.max(0, wait),
    );
  }

  /**
   * Not held back by a 429 since it was claimed, nor missed. (A learned rate has no window to
   * keep: a late timer only sends late.)
   */
  #usable(slot: Slot, now: number): boolean {
    return now >= this.#pausedUntil && !(this.#o.limit && this.#missed(slot, now));
  }

  #take(w: Waiter, slot: Slot): void {
    w.taken = slot;
    w.takenAt = Date.now();
    this.#settle(w);
  }

  /**
   * A send time gone by too far to use. Known limit: more than a third of the margin late, so
   * every take resolves within that of its grant (on Redis's clock, within the clock sample's
   * error) and the rest is left for the way to the wire (the write fence's call, the HTTP
   * client): the log's windows hold.
   * Learning: a spare slot more than a few ms gone (a burst would follow); one just due, placed
   * on this clock a little in the past by the clock sample, is used.
   */
  #missed(slot: Slot, now: number): boolean {
    return now - slot.at > this.#missedAfter();
  }

  /** How late a send time may be used (#missed). */
  #missedAfter(): number {
    return this.#o.limit ? this.#margin / 3 : LEARNING_LATE_MS;
  }

  /**
   * Redis's clock minus this process's, sampled by a claim asked at `asked` and answered at
   * `answered` (Redis read its clock in between: the error is at most half the round trip).
   */
  #learnClock(asked: number, answered: number, redisNow: number): number {
    const error = (answered - asked) / 2;
    let c = this.#clock;
    if (!c || error <= c.error || answered - c.at > CLOCK_SAMPLE_MS) {
      c = { offset: redisNow - (asked + answered) / 2, error, at: answered };
      this.#clock = c;
    }
    return c.offset;
  }

  #settle(w: Waiter, err?: unknown): void {
    if (w.done) return;
    w.done = true;
    this.#watch.remove(w);
    if (err === undefined) w.resolve(true);
    else w.reject(err);
  }
}

/**
 * How far ahead of Redis's now send times are claimed (CLAIM's `lead`), from the measured reply
 * time. A known limit's token is used only within usableForMs of its grant: the whole reply time.
 * A learned rate's may be used up to LEARNING_LATE_MS late, so its lead leaves half of that out:
 * with Redis close by (a reply in a few ms) its send times have come when they arrive and are
 * used at once, where a lead of the whole reply time put nine rows in ten on a timer for it
 * (bench/RESULTS.md, issue 42); a Redis far away still gets them ahead, in time to use.
 */
export function claimLeadMs(knownLimit: boolean, replyMs: number): number {
  return knownLimit ? replyMs : Math.max(0, replyMs - LEARNING_LATE_MS / 2);
}

/** An estimate moved toward a new sample: fast when it rises, slowly when it falls (RISE, FALL). */
function follow(estimate: number, sample: number): number {
  return estimate + (sample - estimate) * (sample > estimate ? RISE : FALL);
}

/** A token wait whose send time the caller's own Redis call claims (SharedTokenBucket.carry). */
export interface CarriedWait {
  readonly wait: TokenWait;
  /** What the call carries; undefined: the budget serves the wait its own way. */
  readonly claim: CarriedClaim | undefined;
  /** The call answered: the send time it claimed, or undefined (none claimed, or the call failed). */
  answered(claimed: Claimed | undefined): void;
}

/** What spends a workspace's request budget: every CRM request takes a token first. */
export interface RequestBudget {
  take(signal?: AbortSignal): Promise<unknown>;
}

/**
 * The workspace's shared budget as its configuration says (a known `rateLimit`, or the rate
 * learned from 429s): workers, reconcile's and verify's list pages all take from this one.
 */
export function workspaceRequestBudget(
  redis: RedisClient,
  config: Config,
  workspace: string,
  client?: { watchSendDelays(watch: (ms: number) => void): unknown },
): SharedTokenBucket {
  const { rateLimit } = getWorkspace(config, workspace);
  const bucket = new SharedTokenBucket({
    redis,
    key: requestBudgetKey(config.prefix, workspace),
    ...(rateLimit ? { limit: rateLimit } : {}),
  });
  // The client whose requests the tokens pace: its late sends widen the margin, as a worker's do
  // (a command's list pages on a loaded machine bunched 11 into a window of a 10/s limit).
  client?.watchSendDelays((ms) => bucket.noteSendDelay(ms));
  return bucket;
}
