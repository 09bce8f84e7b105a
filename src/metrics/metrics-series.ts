import type { RedisClient } from '../redis/index.js';
import { seriesKey } from '../keys/index.js';
import { METRIC } from './metric-names.js';
import { countOf } from '../counts/index.js';

/**
 * A short time series of the fleet counters per workspace, for the dashboard's activity charts:
 * one Redis hash per workspace and 10-second bucket, `<p>:metrics:series:<workspace>:<bucket>`,
 * fields `requests`, `rateLimited`, `failed`, `succeeded`, each key expiring after two hours. So
 * a workspace never holds more than 720 small hashes, whatever runs (docs/architecture.md).
 * Each run has a series of its own too, one bounded hash per run, kept in run-series.ts.
 */
export const SERIES_BUCKET_MS = 10_000;
export const SERIES_TTL_SECONDS = 2 * 3600;

export const SERIES_FIELDS = ['requests', 'rateLimited', 'failed', 'succeeded'] as const;
export type SeriesField = (typeof SERIES_FIELDS)[number];

export interface SeriesPoint {
  /** Start of the bucket (epoch ms). */
  t: number;
  requests: number;
  rateLimited: number;
  failed: number;
  succeeded: number;
}

export function bucketOf(ms: number): number {
  return Math.floor(ms / SERIES_BUCKET_MS);
}

/** The series field a counter increment adds to, or null for counters the charts do not show. */
export function seriesFieldOf(metric: string, labels: Record<string, string>): SeriesField | null {
  if (metric === METRIC.requests) return 'requests';
  if (metric === METRIC.rateLimited) return 'rateLimited';
  if (metric === METRIC.rows && (labels.status === 'failed' || labels.status === 'succeeded')) return labels.status;
  return null;
}

/** Most buckets one read returns: the whole retention. */
const MAX_POINTS = SERIES_TTL_SECONDS / (SERIES_BUCKET_MS / 1000);

/**
 * A workspace's buckets from `fromMs` to `toMs` (clipped to the retention, and to the newest
 * MAX_POINTS buckets), oldest first; buckets nobody wrote to are zeros.
 */
export async function readSeries(
  redis: RedisClient,
  prefix: string,
  workspace: string,
  fromMs: number,
  toMs: number,
): Promise<SeriesPoint[]> {
  const last = bucketOf(toMs);
  const first = Math.max(bucketOf(fromMs), last - MAX_POINTS + 1, bucketOf(Date.now() - SERIES_TTL_SECONDS * 1000));
  if (first > last) return [];
  const pipeline = redis.pipeline();
  for (let b = first; b <= last; b++) pipeline.hmget(seriesKey(prefix, workspace, b), ...SERIES_FIELDS);
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([error, values], i) => {
    if (error) throw error;
    const v = values as Array<string | null>;
    const n = (k: number) => countOf(v[k]);
    return { t: (first + i) * SERIES_BUCKET_MS, requests: n(0), rateLimited: n(1), failed: n(2), succeeded: n(3) };
  });
}
