import { afterAll, describe, expect, it } from 'vitest';
import {
  addToRunSeries,
  MetricsRecorder,
  METRIC,
  readCounters,
  readRunSeries,
  RUN_SERIES_MAX_BUCKETS,
  RUN_SERIES_TTL_SECONDS,
  SERIES_BUCKET_MS,
  type RunIncrements,
} from '../../src/metrics/index.js';
import { runSeriesKey, seriesKey } from '../../src/keys/index.js';
import { testRedis } from '../runs/redis-fixture.js';

/* A run's own activity series (src/metrics/run-series.ts): fed by the counters' flush, bounded. */

const { redis, prefix, cleanup } = testRedis();

afterAll(cleanup);

const one = (runId: string, n: RunIncrements) => new Map([[runId, n]]);

describe("a run's activity series", () => {
  it('keeps at most RUN_SERIES_MAX_BUCKETS buckets however long the run goes, and expires', async () => {
    const key = runSeriesKey(prefix, 'run-long');
    const b0 = 170_000_000;
    // 1,000 buckets in a row (2 h 47 min of a run): only the newest 720 stay.
    const pipeline = [];
    for (let i = 0; i < 1000; i++) pipeline.push(addToRunSeries(redis, prefix, one('run-long', [2, 0, 0, 1]), b0 + i));
    await Promise.all(pipeline);
    const fields = await redis.hkeys(key);
    expect(fields.length).toBe(RUN_SERIES_MAX_BUCKETS + 1); // the buckets and `last`
    const buckets = fields.filter((f) => f !== 'last').map(Number);
    expect(Math.min(...buckets)).toBe(b0 + 1000 - RUN_SERIES_MAX_BUCKETS);
    expect(Math.max(...buckets)).toBe(b0 + 999);
    const ttl = await redis.ttl(key);
    expect(ttl).toBeGreaterThan(RUN_SERIES_TTL_SECONDS - 60);
    expect(ttl).toBeLessThanOrEqual(RUN_SERIES_TTL_SECONDS);
    const memory = Number(await redis.call('MEMORY', 'USAGE', key));
    console.log(`[run series] a full series (${RUN_SERIES_MAX_BUCKETS} buckets) takes ${memory} bytes in Redis`);

    const points = await readRunSeries(redis, prefix, 'run-long');
    expect(points).toHaveLength(RUN_SERIES_MAX_BUCKETS);
    expect(points[0]).toEqual({
      t: (b0 + 280) * SERIES_BUCKET_MS,
      requests: 2,
      rateLimited: 0,
      failed: 0,
      succeeded: 1,
    });

    // A bucket far behind the newest (a clock hours slow) is dropped, not stored.
    await addToRunSeries(redis, prefix, one('run-long', [5, 5, 5, 5]), b0);
    expect(await redis.hexists(key, String(b0))).toBe(0);
    // After a long quiet spell (a retry hours later) the old window goes at once.
    await addToRunSeries(redis, prefix, one('run-long', [1, 0, 0, 0]), b0 + 5000);
    expect(await redis.hgetall(key)).toEqual({ last: String(b0 + 5000), [String(b0 + 5000)]: '1,0,0,0' });
  });

  it('adds increments of the same bucket, starts from a zero, fills quiet buckets with zeros and runs up to now while the run goes', async () => {
    const b = 170_100_000;
    await addToRunSeries(redis, prefix, one('run-gaps', [3, 1, 0, 0]), b);
    await addToRunSeries(redis, prefix, one('run-gaps', [4, 0, 1, 2]), b);
    await addToRunSeries(redis, prefix, one('run-gaps', [1, 0, 0, 1]), b + 3);
    const points = await readRunSeries(redis, prefix, 'run-gaps');
    expect(points[0]!.t).toBe((b - 1) * SERIES_BUCKET_MS);
    expect(points.map((p) => [p.requests, p.rateLimited, p.failed, p.succeeded])).toEqual([
      [0, 0, 0, 0],
      [7, 1, 1, 2],
      [0, 0, 0, 0],
      [0, 0, 0, 0],
      [1, 0, 0, 1],
    ]);
    const untilNow = await readRunSeries(redis, prefix, 'run-gaps', (b + 5) * SERIES_BUCKET_MS + 1);
    expect(untilNow).toHaveLength(7);
    expect(await readRunSeries(redis, prefix, 'no-such-run', Date.now())).toEqual([]);
  });

  it("is fed by the recorder's flush from increments that name their run; the fleet counters carry no run", async () => {
    const recorder = new MetricsRecorder({ redis, prefix, flushMs: 60_000 });
    const workspace = 'acme';
    recorder.inc(METRIC.requests, { workspace, operation: 'deal.update', status: '2xx' }, 1, 'run-a');
    recorder.inc(METRIC.requests, { workspace, operation: 'deal.update', status: '2xx' }, 1, 'run-a');
    recorder.inc(METRIC.requests, { workspace, operation: 'deal.update', status: '429' }, 1, 'run-b');
    recorder.inc(METRIC.rateLimited, { workspace }, 1, 'run-b');
    recorder.inc(METRIC.rows, { workspace, operation: 'deal.update', status: 'succeeded' }, 2, 'run-a');
    recorder.inc(METRIC.rows, { workspace, operation: 'deal.update', status: 'failed' }, 1, 'run-b');
    // Not charted: counts in /metrics only.
    recorder.inc(METRIC.retries, { workspace, operation: 'deal.update' }, 1);
    await recorder.close();
    const sum = async (runId: string) => {
      const points = await readRunSeries(redis, prefix, runId);
      return points.reduce<RunIncrements>(
        (a, p) => [a[0] + p.requests, a[1] + p.rateLimited, a[2] + p.failed, a[3] + p.succeeded],
        [0, 0, 0, 0],
      );
    };
    expect(await sum('run-a')).toEqual([2, 0, 0, 2]);
    expect(await sum('run-b')).toEqual([1, 1, 1, 0]);
    const counters = await readCounters(redis, prefix);
    expect(counters.some((c) => 'run' in c.labels)).toBe(false);
    expect(counters.find((c) => c.metric === METRIC.requests && c.labels.status === '2xx')?.value).toBe(2);
  });
});

describe("the recorder's flush when some writes fail", () => {
  it('counts a failed counter at the next flush and a written one never twice; a failed run series is kept too', async () => {
    const local = `${prefix}:partial`;
    const recorder = new MetricsRecorder({ redis, prefix: local, flushMs: 60_000 });
    const workspace = 'acme';
    const bucketNow = Math.floor(Date.now() / SERIES_BUCKET_MS);
    // The chart's series buckets of this moment cannot take a HINCRBY (wrong type), nor can run-x's series.
    for (const b of [bucketNow, bucketNow + 1]) await redis.set(seriesKey(local, workspace, b), 'not a hash');
    await redis.set(runSeriesKey(local, 'run-x'), 'not a hash');
    recorder.inc(METRIC.requests, { workspace, operation: 'deal.update', status: '2xx' }, 3, 'run-x');
    await recorder.flush();
    const requests = async () =>
      (await readCounters(redis, local)).find((c) => c.metric === METRIC.requests)?.value ?? 0;
    expect(await requests()).toBe(3); // the counter went in although its chart copy failed
    await redis.del(runSeriesKey(local, 'run-x'));
    recorder.inc(METRIC.requests, { workspace, operation: 'deal.update', status: '2xx' }, 1);
    await recorder.close();
    expect(await requests()).toBe(4); // not 7: the written counter was not kept back
    const points = await readRunSeries(redis, local, 'run-x');
    expect(points.reduce((n, p) => n + p.requests, 0)).toBe(3); // the failed run series came at the next flush
  });
});
