import type { RedisClient } from '../redis/index.js';
import { DEFAULTS } from '../config/index.js';
import { metricsKey, seriesKey } from '../keys/index.js';
import { SERIES_TTL_SECONDS, bucketOf, seriesFieldOf, type SeriesField } from './metrics-series.js';
import { FIELD_INDEX, addToRunSeries, type RunIncrements } from './run-series.js';
import { tally } from '../counts/index.js';

export interface MetricsRecorderOptions {
  redis: RedisClient;
  /** Key prefix from the config. */
  prefix: string;
  /** How often buffered increments go to Redis. Default DEFAULTS.metrics.flushMs (1000 ms). */
  flushMs?: number;
}

export interface CounterSample {
  metric: string;
  labels: Record<string, string>;
  value: number;
}

const fieldCache = new Map<string, string>();
/** Series bucket field of a counter field (null: not charted), memoised like fieldCache. */
const seriesCache = new Map<string, { workspace: string; field: SeriesField } | null>();

/** Fields of label objects a caller keeps and passes again (WorkerMetrics): found by the object. */
const fieldOfLabels = new WeakMap<Record<string, string>, { metric: string; field: string }>();

/** The hash field of a counter: metric + labels in key order (memoised: inc is on the hot path). */
function field(metric: string, labels: Record<string, string>): string {
  const known = fieldOfLabels.get(labels);
  if (known?.metric === metric) return known.field;
  const f = fieldOfNew(metric, labels);
  fieldOfLabels.set(labels, { metric, field: f });
  return f;
}

function fieldOfNew(metric: string, labels: Record<string, string>): string {
  const quick = `${metric}\u0000${Object.keys(labels).join('\u0001')}\u0000${Object.values(labels).join('\u0001')}`;
  let f = fieldCache.get(quick);
  if (f === undefined) {
    f = `${metric}|${JSON.stringify(Object.fromEntries(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b))))}`;
    if (fieldCache.size < 10_000) fieldCache.set(quick, f);
  }
  return f;
}

/**
 * Counters that only worker processes observe (requests by status, 429s, retries) are summed
 * in one Redis hash, so the dashboard's /metrics shows the whole fleet, not one process.
 * Increments are buffered and flushed once a second: metrics must never slow the hot path.
 */
export class MetricsRecorder {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #prefix: string;
  #buffer = new Map<string, number>();
  /** The charted increments by run, for the runs' own series (run-series.ts). */
  #runs = new Map<string, RunIncrements>();
  readonly #timer: NodeJS.Timeout;

  constructor(options: MetricsRecorderOptions) {
    this.#redis = options.redis;
    this.#key = metricsKey(options.prefix);
    this.#prefix = options.prefix;
    this.#timer = setInterval(() => void this.flush(), options.flushMs ?? DEFAULTS.metrics.flushMs);
    this.#timer.unref();
  }

  /**
   * `run`: the run the counted work belongs to, when there is one. It is no label (the fleet
   * counters stay one field per label set, whatever runs): it only adds the increment to that
   * run's own series as well, on the same flush.
   */
  inc(metric: string, labels: Record<string, string>, n = 1, run?: string): void {
    const f = field(metric, labels);
    this.#add(f, n);
    let s = seriesCache.get(f);
    if (s === undefined) {
      const sf = labels.workspace !== undefined ? seriesFieldOf(metric, labels) : null;
      s = sf === null ? null : { workspace: labels.workspace!, field: sf };
      if (seriesCache.size < 10_000) seriesCache.set(f, s);
    }
    if (run !== undefined && s !== null) {
      let r = this.#runs.get(run);
      if (r === undefined) {
        r = [0, 0, 0, 0];
        this.#runs.set(run, r);
      }
      r[FIELD_INDEX[s.field]] += n;
    }
  }

  /** Buffers `n` more of counter field `f`. */
  #add(f: string, n: number): void {
    tally(this.#buffer, f, n);
  }

  async flush(): Promise<void> {
    if (this.#buffer.size === 0) return;
    const batch = this.#buffer;
    this.#buffer = new Map();
    const runs = this.#runs;
    this.#runs = new Map();
    // Single commands, not one MULTI: the counters and each workspace's series bucket live in
    // different Cluster slots. So each counter is kept back on its own when its write fails (Redis
    // away: counted at the next flush, never twice), and its series copy (the charts, a bounded,
    // expiring copy) is written only once the counter is.
    const bucket = bucketOf(Date.now());
    const touched = new Set<string>();
    const counters = [...batch].map(([f, n]) =>
      this.#redis.hincrby(this.#key, f, n).then(
        async () => {
          const s = seriesCache.get(f);
          if (!s) return;
          const key = seriesKey(this.#prefix, s.workspace, bucket);
          touched.add(key);
          await this.#redis.hincrby(key, s.field, n).catch(() => undefined);
        },
        () => this.#add(f, n),
      ),
    );
    const [, failedRuns] = await Promise.all([
      Promise.all(counters),
      // The runs' own series: one script call a run; the runs whose call failed are kept back.
      addToRunSeries(this.#redis, this.#prefix, runs, bucket),
    ]);
    await Promise.all([...touched].map((key) => this.#redis.expire(key, SERIES_TTL_SECONDS).catch(() => undefined)));
    for (const run of failedRuns) {
      const n = runs.get(run)!;
      const r = this.#runs.get(run);
      if (r === undefined) this.#runs.set(run, n);
      else for (let i = 0; i < n.length; i++) r[i]! += n[i]!;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }
}

/** Every counter recorded by any worker process. */
export async function readCounters(redis: RedisClient, prefix: string): Promise<CounterSample[]> {
  const all = await redis.hgetall(metricsKey(prefix));
  return Object.entries(all).map(([f, v]) => {
    const bar = f.indexOf('|');
    return {
      metric: f.slice(0, bar),
      labels: JSON.parse(f.slice(bar + 1)) as Record<string, string>,
      value: Number(v),
    };
  });
}
