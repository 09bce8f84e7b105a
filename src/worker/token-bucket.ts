import type { Redis } from 'ioredis';
import { LuaScript } from '../runs/index.js';

/**
 * Claims send times for up to N requests in one step: GCRA, the token bucket kept as one
 * number, the theoretical arrival time (TAT) of the next request on Redis's clock. Request i
 * may go at max(now, TAT - tolerance); each one moves TAT on by `interval`. Only times within
 * `horizon` of now are granted, so a process never holds slots far ahead.
 * Returns {wait, offset...}: the granted requests' send times as ms from now; with none
 * granted, `wait` is the ms until the first would fall within the horizon.
 */
const CLAIM = new LuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local interval, tolerance, n, horizon = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
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

/** A 429's pause: no request of any process is granted a send time before now + ARGV[1] ms. */
const PAUSE = new LuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local resume = now + tonumber(ARGV[1]) + tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if resume > tat then redis.call('SET', KEYS[1], string.format('%.3f', resume), 'PX', math.ceil(resume - now) + 60000) end
return 1
`);

export interface SharedTokenBucketOptions {
  redis: Redis;
  /** The workspace's bucket key, shared by all its worker processes. */
  key: string;
  /** Requests allowed per window. */
  limit: { max: number; durationMs: number };
  /** How far ahead send times are claimed. Default 1000 ms. */
  horizonMs?: number;
  /** Most send times claimed in one call. Default 64. */
  maxBatch?: number;
}

interface Waiter {
  resolve(): void;
  reject(err: unknown): void;
  signal: AbortSignal | undefined;
  onAbort?: () => void;
  timer?: NodeJS.Timeout;
}

/**
 * The workspace's request budget, one for all its worker processes (docs/architecture.md,
 * "Rate limits"): every CRM request, row or list page, takes a token before it is sent. The
 * requests waiting in this process share one Redis call (a batch of send times, given out in
 * order), so the budget costs a fraction of a command per request however rows share jobs.
 * Bursts are at most a tenth of the limit (a CRM that meters with a sliding window or a
 * small bucket sees the same rate as a steady stream).
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

  constructor(options: SharedTokenBucketOptions) {
    this.#o = options;
    this.#interval = options.limit.durationMs / options.limit.max;
    this.#tolerance = (Math.ceil(options.limit.max / 10) - 1) * this.#interval;
    this.#horizon = options.horizonMs ?? 1000;
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

  /** The CRM answered 429: no process of the workspace sends before `ms` from now. */
  async pause(ms: number): Promise<void> {
    this.#pausedUntil = Math.max(this.#pausedUntil, Date.now() + ms);
    this.#spare = [];
    await PAUSE.run(this.#o.redis, [this.#o.key], [ms, this.#tolerance.toFixed(3)]);
  }

  /** Hands out spare send times, then claims more for whoever still waits (one call at a time). */
  #pump(): void {
    const now = Date.now();
    // A send time unused for longer than one interval is gone: using it would make a burst.
    this.#spare = this.#spare.filter((at) => at >= now - this.#interval && at >= this.#pausedUntil);
    while (this.#waiting.length > 0 && this.#spare.length > 0) this.#schedule(this.#waiting.shift()!, this.#spare.shift()!);
    if (this.#waiting.length === 0 || this.#claiming || this.#retry) return;
    if (now < this.#pausedUntil) {
      // The 429's pause is also in Redis (or on its way there): ask again when it is over.
      this.#retryIn(this.#pausedUntil - now);
      return;
    }
    this.#claiming = true;
    const n = Math.min(this.#waiting.length, this.#o.maxBatch ?? 64);
    const { redis, key } = this.#o;
    CLAIM.run(redis, [key], [this.#interval.toFixed(6), this.#tolerance.toFixed(3), n, this.#horizon])
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
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.#pump();
    }, Math.max(1, Math.ceil(ms)));
  }

  /** The waiter sends at `at`, unless a 429 came meanwhile: then it queues again. */
  #schedule(w: Waiter, at: number): void {
    w.timer = setTimeout(() => {
      if (Date.now() < this.#pausedUntil) {
        this.#waiting.unshift(w);
        this.#pump();
        return;
      }
      this.#settle(w);
    }, Math.max(0, at - Date.now()));
  }

  #settle(w: Waiter, err?: unknown): void {
    if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
    if (err === undefined) w.resolve();
    else w.reject(err);
  }
}
