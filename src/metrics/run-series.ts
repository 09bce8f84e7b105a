import type { RedisClient } from '../redis/index.js';
import { runSeriesKey } from '../keys/index.js';
import { LuaScript } from '../runs/index.js';
import { SERIES_BUCKET_MS, bucketOf, type SeriesField, type SeriesPoint } from './metrics-series.js';

/*
 * The run's own activity series, next to the workspace's (docs/architecture.md, "Activity
 * series"): the same 10-second buckets and fields, fed by the same flush of the workers'
 * counters, for the run page's chart. Key layout (this module owns it):
 *
 *   <p>:metrics:run:<runId>   hash   `<bucket>` → "requests,rateLimited,failed,succeeded" (one
 *                                    field per 10-second bucket), `last` → the newest bucket
 *
 * Bounded: the hash keeps only the buckets within RUN_SERIES_MAX_BUCKETS of its newest one (a
 * write that moves `last` on removes those that fell out, in the same script), so it never holds
 * more than 720 buckets (2 hours of a run, the workspace series' span) plus `last`, however long
 * the run goes; and it expires RUN_SERIES_TTL_SECONDS after its last write.
 */

/** Most buckets a run's series keeps: the run's last two hours, in 10-second steps. */
export const RUN_SERIES_MAX_BUCKETS = 720;
/** A run's series outlives its last request by three days (a weekend's runs, read on Monday). */
export const RUN_SERIES_TTL_SECONDS = 3 * 24 * 3600;

/** One run's increments of a flush, in SERIES_FIELDS order. */
export type RunIncrements = [number, number, number, number];

/** Where each field goes in RunIncrements (SERIES_FIELDS order, which the script's value keeps). */
export const FIELD_INDEX: Record<SeriesField, 0 | 1 | 2 | 3> = { requests: 0, rateLimited: 1, failed: 2, succeeded: 3 };

/**
 * KEYS: the series hash of each run. ARGV[1] the bucket, ARGV[2] most buckets kept, ARGV[3] the
 * TTL (s), then four increments per key (one key a call: see addToRunSeries).
 */
const ADD = new LuaScript(`
local b = tonumber(ARGV[1])
local keep = tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  local last = tonumber(redis.call('HGET', key, 'last'))
  if last == nil or b > last then
    if last ~= nil then
      -- The window moves on: remove the buckets that fell out of it (by the bound, only these can exist).
      for old = last - keep + 1, math.min(last, b - keep) do redis.call('HDEL', key, string.format('%d', old)) end
    end
    redis.call('HSET', key, 'last', ARGV[1])
    last = b
  end
  -- A bucket already out of the window (a clock far behind) is dropped, never stored.
  if b > last - keep then
    local o = 3 + (i - 1) * 4
    local v = redis.call('HGET', key, ARGV[1])
    local n = { 0, 0, 0, 0 }
    if v then
      local k = 1
      for part in string.gmatch(v, '%d+') do n[k] = tonumber(part); k = k + 1 end
    end
    for k = 1, 4 do n[k] = n[k] + tonumber(ARGV[o + k]) end
    redis.call('HSET', key, ARGV[1], string.format('%d,%d,%d,%d', n[1], n[2], n[3], n[4]))
  end
  redis.call('EXPIRE', key, ARGV[3])
end
return #KEYS
`);

/**
 * Adds one flush's increments of each run into `bucket` (MetricsRecorder calls it once a second).
 * Answers the runs whose write failed (Redis away), for the caller to keep for the next flush.
 */
export async function addToRunSeries(
  redis: RedisClient,
  prefix: string,
  increments: ReadonlyMap<string, RunIncrements>,
  bucket: number,
): Promise<string[]> {
  // One call a run: runs' series keys have no common hash tag, and a script on a Redis Cluster
  // may only name keys of one slot. A flush carries the few runs that sent in the last second.
  const runs = [...increments];
  const settled = await Promise.allSettled(
    runs.map(([runId, n]) =>
      ADD.run(redis, [runSeriesKey(prefix, runId)], [bucket, RUN_SERIES_MAX_BUCKETS, RUN_SERIES_TTL_SECONDS, ...n]),
    ),
  );
  return runs.filter((_, i) => settled[i]!.status === 'rejected').map(([runId]) => runId);
}

/**
 * A run's buckets, oldest first, from the one before the oldest kept to the newest written, or to
 * `toMs` when given and later (a run under way: its quiet last seconds are zeros too). Buckets
 * nobody wrote to are zeros; at most RUN_SERIES_MAX_BUCKETS points. Empty when the run has no
 * series (nothing was sent, or it expired).
 */
export async function readRunSeries(
  redis: RedisClient,
  prefix: string,
  runId: string,
  toMs?: number,
): Promise<SeriesPoint[]> {
  const all = await redis.hgetall(runSeriesKey(prefix, runId));
  const byBucket = new Map<number, string>();
  for (const [field, value] of Object.entries(all)) if (field !== 'last') byBucket.set(Number(field), value);
  if (byBucket.size === 0) return [];
  const written = [...byBucket.keys()];
  const last = Math.max(...written, toMs !== undefined ? bucketOf(toMs) : -Infinity);
  // From the bucket before the oldest written: a zero (the run had sent nothing yet), so even a
  // run of a few seconds draws as a rise; unless that would pass the bound (older ones were cut).
  const first = Math.max(Math.min(...written) - 1, last - RUN_SERIES_MAX_BUCKETS + 1);
  const points: SeriesPoint[] = [];
  for (let b = first; b <= last; b++) {
    const [requests = 0, rateLimited = 0, failed = 0, succeeded = 0] = (byBucket.get(b) ?? '').split(',').map(Number);
    points.push({ t: b * SERIES_BUCKET_MS, requests, rateLimited, failed, succeeded });
  }
  return points;
}
