import { runSeriesKey } from '../keys/index.js';
import { defineScript, numberReply, type RedisClient } from '../redis/index.js';
import { SERIES_BUCKET_MS, SERIES_FIELDS, bucketOf, type SeriesField, type SeriesPoint } from './metrics-series.js';

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

/** Adds one bucket's increments to a run's series, dropping what fell out of its window. */
const ADD = defineScript({
  file: 'add-run-series-1',
  keys: ['seriesKey'],
  args: ['bucket', 'keep', 'ttlSeconds', ...SERIES_FIELDS],
  reply: numberReply,
});

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
      ADD.run(
        redis,
        { seriesKey: runSeriesKey(prefix, runId) },
        {
          bucket,
          keep: RUN_SERIES_MAX_BUCKETS,
          ttlSeconds: RUN_SERIES_TTL_SECONDS,
          requests: n[FIELD_INDEX.requests],
          rateLimited: n[FIELD_INDEX.rateLimited],
          failed: n[FIELD_INDEX.failed],
          succeeded: n[FIELD_INDEX.succeeded],
        },
      ),
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
