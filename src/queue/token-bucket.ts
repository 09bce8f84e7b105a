import type { RedisClient } from '../redis/index.js';
import { getWorkspace, type Config } from '../config/index.js';
import { requestBudgetKey } from '../keys/index.js';
import { LuaScript } from '../runs/index.js';

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
`;

/**
 * Claims send times for up to N requests in one step: GCRA, the token bucket kept as one
 * number, the theoretical arrival time (TAT) of the next request on Redis's clock. Request i
 * may go at max(now, TAT - tolerance); each one moves TAT on by `interval`. Only times within
 * `horizon` of now are granted, so a process never holds slots far ahead.
 *
 * KEYS[1] the TAT, KEYS[2] the learned rate (a hash: rate, ceiling, at, cut, hold). ARGV[1] interval
 * ms, or 0 to use the learned rate; ARGV[2] tolerance ms; ARGV[3] N; ARGV[4] horizon ms;
 * ARGV[5] the rate to start from when none was learned yet (requests/s).
 *
 * Learning (ARGV[1] = 0): while requests wait on the budget (TAT ahead of now, and not
 * because of a 429's pause: `hold`), the rate
 * grows with the time that passes: about doubling a second far below the last rate a 429
 * cut (the ceiling), then by 0.5 % of the ceiling a second, faster the longer it holds above
 * it (the limit was raised, or the ceiling was low).
 *
 * Returns {wait, offset...}: the granted requests' send times as ms from now; with none
 * granted, `wait` is the ms until the first would fall within the horizon.
 */
const CLAIM = new LuaScript(`${NOW}
local interval, tolerance, n, horizon = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if interval == 0 then
  local st = redis.call('HMGET', KEYS[2], 'rate', 'ceiling', 'at', 'hold')
  local rate, ceiling, at = tonumber(st[1]) or tonumber(ARGV[5]), tonumber(st[2]) or 0, tonumber(st[3]) or now
  -- A 429's pause also puts TAT ahead of now: that is no sign of demand above the rate.
  if tat > now and now >= (tonumber(st[4]) or 0) then
    local dt = math.min(math.max(now - at, 0), 1000) / 1000
    if ceiling == 0 or rate < ceiling * 0.9 then
      rate = rate * (1 + dt)
    else
      rate = rate + ceiling * (0.005 + 0.2 * math.max(0, rate / ceiling - 1)) * dt
    end
  end
  redis.call('HSET', KEYS[2], 'rate', string.format('%.4f', rate), 'at', string.format('%.3f', now))
  interval = 1000 / rate
end
if tat < now then tat = now end
local out = {'0'}
for i = 1, n do
  local at = tat - tolerance
  if at < now then at = now end
  if at > now + horizon then break end
  out[#out + 1] = string.format('%.3f', at - now)
  tat = tat + interval
end
if #out == 1 then
  out[1] = string.format('%.3f', tat - tolerance - horizon - now)
  return out
end
redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 60000)
return out
`);

/**
 * A 429's pause: no request of any process is granted a send time before now + ARGV[1] ms.
 * With ARGV[3] = '1' (a learned rate, KEYS[2]) the rate is also cut, once per ARGV[4] ms (the
 * 429s of requests sent before the cut say nothing new): the first 429 halves it (growth
 * from the start overshoots up to about twice), later ones take 10 % off; the rate cut is
 * remembered as the ceiling. Returns the rate (0 with a known limit).
 */
const PAUSE = new LuaScript(`${NOW}
local resume = now + tonumber(ARGV[1]) + tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if resume > tat then redis.call('SET', KEYS[1], string.format('%.3f', resume), 'PX', math.ceil(resume - now) + 60000) end
if ARGV[3] ~= '1' then return '0' end
redis.call('HSET', KEYS[2], 'hold', string.format('%.3f', resume))
local st = redis.call('HMGET', KEYS[2], 'rate', 'ceiling', 'cut')
local rate, ceiling, cut = tonumber(st[1]), tonumber(st[2]) or 0, tonumber(st[3]) or 0
if not rate or now - cut < tonumber(ARGV[4]) then return tostring(rate or 0) end
if ceiling == 0 then ceiling = rate / 2 else ceiling = rate end
rate = math.max(tonumber(ARGV[5]), ceiling * 0.9)
redis.call('HSET', KEYS[2], 'rate', string.format('%.4f', rate), 'ceiling', string.format('%.4f', ceiling), 'cut', string.format('%.3f', now), 'at', string.format('%.3f', now))
return string.format('%.4f', rate)
`);

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
  /** The rate a workspace with nothing learned yet starts from (requests/s). Default 10. */
  initialRate?: number;
  /** How far ahead send times are claimed. Default 1000 ms with a known limit, 250 ms learning. */
  horizonMs?: number;
  /** Most send times claimed in one call. Default 64. */
  maxBatch?: number;
}

/** 429s within this long of a cut come from requests sent before it: they cut nothing more. */
const CUT_COOLDOWN_MS = 2000;
/** A learned rate never falls below this (requests/s): the budget must not stall a workspace. */
const MIN_RATE = 0.5;

interface Waiter {
  resolve(): void;
  reject(err: unknown): void;
  signal: AbortSignal | undefined;
  onAbort?: () => void;
  timer?: NodeJS.Timeout;
}

/**
 * The workspace's request budget, one for all its worker processes (docs/architecture.md,
 * "Rate limits"), at a known limit or at a rate it learns from 429s: every CRM request, row
 * or list page, takes a token before it is sent. The
 * requests waiting in this process share one Redis call (a batch of send times, given out in
 * order), so the budget costs a fraction of a command per request however rows share jobs.
 * Bursts are at most a tenth of a known limit (a CRM that meters with a sliding window or a
 * small bucket sees the same rate as a steady stream), none at a learned rate.
 */
export class SharedTokenBucket {
  readonly #o: SharedTokenBucketOptions;
  readonly #interval: number;
  readonly #tolerance: number;
  readonly #horizon: number;
  readonly #waiting: Waiter[] = [];
  /** Send times claimed but not handed out (their waiter went away), local epoch ms. */
  #spare: number[] = [];
  #claiming = false;
  #retry: NodeJS.Timeout | undefined;
  /** A 429 this process saw: send times before this are not used (local epoch ms). */
  #pausedUntil = 0;

  readonly #rateKey: string;

  constructor(options: SharedTokenBucketOptions) {
    this.#o = options;
    const { limit } = options;
    // Learning, the interval comes from Redis (0 says so), and no burst is allowed: above an
    // unknown limit a burst is only more 429s.
    this.#interval = limit ? limit.durationMs / limit.max : 0;
    this.#tolerance = limit ? (Math.ceil(limit.max / 10) - 1) * this.#interval : 0;
    this.#horizon = options.horizonMs ?? (limit ? 1000 : 250);
    this.#rateKey = options.rateKey ?? `${options.key}:rate`;
  }

  /** Resolves when this request may be sent (its token taken); rejects when `signal` aborts. */
  take(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = { resolve, reject, signal };
      if (signal) {
        w.onAbort = () => {
          clearTimeout(w.timer);
          const i = this.#waiting.indexOf(w);
          if (i >= 0) this.#waiting.splice(i, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
      this.#waiting.push(w);
      this.#pump();
    });
  }

  /**
   * The CRM answered 429: no process of the workspace sends before `ms` from now, and a learned
   * rate is cut. Returns the learned rate after it (requests/s; 0 with a known limit).
   */
  async pause(ms: number): Promise<number> {
    this.#pausedUntil = Math.max(this.#pausedUntil, Date.now() + ms);
    this.#spare = [];
    const learning = this.#o.limit ? '0' : '1';
    const rate = await PAUSE.run(
      this.#o.redis,
      [this.#o.key, this.#rateKey],
      [ms, this.#tolerance.toFixed(3), learning, CUT_COOLDOWN_MS, MIN_RATE],
    );
    return Number(rate);
  }

  /** Hands out spare send times, then claims more for whoever still waits (one call at a time). */
  #pump(): void {
    const now = Date.now();
    // A send time unused for longer than one interval is gone: using it would make a burst.
    this.#spare = this.#spare.filter((at) => at >= now - this.#interval && at >= this.#pausedUntil);
    while (this.#waiting.length > 0 && this.#spare.length > 0)
      this.#schedule(this.#waiting.shift()!, this.#spare.shift()!);
    if (this.#waiting.length === 0 || this.#claiming || this.#retry) return;
    if (now < this.#pausedUntil) {
      // The 429's pause is also in Redis (or on its way there): ask again when it is over.
      this.#retryIn(this.#pausedUntil - now);
      return;
    }
    this.#claiming = true;
    const n = Math.min(this.#waiting.length, this.#o.maxBatch ?? 64);
    const { redis, key } = this.#o;
    CLAIM.run(
      redis,
      [key, this.#rateKey],
      [this.#interval.toFixed(6), this.#tolerance.toFixed(3), n, this.#horizon, this.#o.initialRate ?? 10],
    )
      .then((reply) => {
        const [wait = 0, ...offsets] = (reply as string[]).map(Number);
        // Offsets are from Redis's now, read before the reply came: counted from after it, a
        // send time is only ever later than granted.
        const base = Date.now();
        for (const off of offsets) this.#spare.push(base + off);
        if (offsets.length === 0) this.#retryIn(wait);
      })
      .catch((err: unknown) => {
        // Redis refused or is away: the requests waiting now fail as any Redis step of a row does.
        for (const w of this.#waiting.splice(0)) this.#settle(w, err);
      })
      .finally(() => {
        this.#claiming = false;
        this.#pump();
      });
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

  /** The waiter sends at `at`, unless a 429 came meanwhile: then it queues again. */
  #schedule(w: Waiter, at: number): void {
    w.timer = setTimeout(
      () => {
        if (Date.now() < this.#pausedUntil) {
          this.#waiting.unshift(w);
          this.#pump();
          return;
        }
        this.#settle(w);
      },
      Math.max(0, at - Date.now()),
    );
  }

  #settle(w: Waiter, err?: unknown): void {
    if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
    if (err === undefined) w.resolve();
    else w.reject(err);
  }
}

/** What spends a workspace's request budget: every CRM request takes a token first. */
export interface RequestBudget {
  take(signal?: AbortSignal): Promise<void>;
}

/**
 * The workspace's shared budget as its configuration says (a known `rateLimit`, or the rate
 * learned from 429s): workers, reconcile's and verify's list pages all take from this one.
 */
export function workspaceRequestBudget(redis: RedisClient, config: Config, workspace: string): SharedTokenBucket {
  const { rateLimit } = getWorkspace(config, workspace);
  return new SharedTokenBucket({
    redis,
    key: requestBudgetKey(config.prefix, workspace),
    ...(rateLimit ? { limit: rateLimit } : {}),
  });
}
