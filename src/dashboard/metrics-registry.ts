import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DEFAULTS, resolveSettings, type Resolved } from '../config/index.js';
import { METRIC, readCounters, type CounterSample } from '../metrics/index.js';
import { FINAL_ROW_STATUSES, RUN_STATUSES, type RunRecord, type RunStatus } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { queueDepth, type QueueDepth } from './queue-depth.js';
import { runDurationMs } from './status-words.js';

export interface DashboardMetricsOptions {
  runtime: Runtime;
  /** Workspaces whose queue depth is reported. */
  workspaces: string[];
  /**
   * Serve only these workspaces (`dashboard -w`): runs, rows and worker counters of any other
   * workspace are left out, as on every other route. Default: all of them.
   */
  only?: readonly string[];
  /** Finished runs (newest first) the duration histogram is built from. Default DEFAULTS.dashboard (500). */
  durationRuns?: number;
  /** Most runs whose rows are summed per scrape, newest first. Default DEFAULTS.dashboard (20,000). */
  maxRunsSummed?: number;
  /** A scrape reuses data read less than this long ago (one read serves every metric). Default DEFAULTS.dashboard (1000 ms). */
  cacheMs?: number;
}

interface Snapshot {
  counters: CounterSample[];
  rows: Map<string, { operation: string; status: string; value: number }>;
  runsByStatus: Record<RunStatus, number>;
  durations: Array<{ operation: string; seconds: number }>;
  queues: Array<{ workspace: string; depth: QueueDepth }>;
}

/** Every result kind of the run store (cancelled included), and the rows still waiting. */
const ROW_STATUSES = [...FINAL_ROW_STATUSES, 'queued'] as const;
const PAGE = 500;

async function readSnapshot(
  options: Resolved<DashboardMetricsOptions, 'durationRuns' | 'maxRunsSummed'>,
): Promise<Snapshot> {
  const { runtime, workspaces, only } = options;
  // One listRuns filter per served workspace (each its own index), or one over every run.
  const scopes: ReadonlyArray<{ workspace?: string }> = only === undefined ? [{}] : only.map((w) => ({ workspace: w }));
  const { durationRuns, maxRunsSummed: maxRuns } = options;
  const rows: Snapshot['rows'] = new Map();
  const finished: Array<{ createdAt: string; operation: string; seconds: number }> = [];
  const add = (run: RunRecord, durations: typeof finished) => {
    for (const status of ROW_STATUSES) {
      const key = `${run.operation}|${status}`;
      const entry = rows.get(key) ?? { operation: run.operation, status, value: 0 };
      entry.value += run.counts[status];
      rows.set(key, entry);
    }
    if (run.finishedAt !== undefined && durations.length < durationRuns) {
      durations.push({ createdAt: run.createdAt, operation: run.operation, seconds: runDurationMs(run) / 1000 });
    }
  };
  let summed = 0;
  for (const scope of scopes) {
    const durations: typeof finished = [];
    for (let offset = 0; summed < maxRuns; offset += PAGE) {
      const { runs } = await runtime.store.listRuns({ ...scope, offset, limit: Math.min(PAGE, maxRuns - summed) });
      for (const run of runs) add(run, durations);
      summed += runs.length;
      if (runs.length < PAGE) break;
    }
    finished.push(...durations);
  }
  // Each scope's list is newest first; merged, the newest `durationRuns` of them all are kept.
  if (scopes.length > 1) finished.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
  const durations = finished.slice(0, durationRuns).map(({ operation, seconds }) => ({ operation, seconds }));
  const served = only === undefined ? null : new Set(only);
  const [allCounters, statusTotals, queues] = await Promise.all([
    readCounters(runtime.redis, runtime.config.prefix),
    Promise.all(
      RUN_STATUSES.map(async (status) => {
        const totals = await Promise.all(scopes.map((scope) => runtime.store.listRuns({ ...scope, status, limit: 0 })));
        return [status, totals.reduce((sum, t) => sum + t.total, 0)] as const;
      }),
    ),
    Promise.all(
      workspaces.map(async (workspace) => ({ workspace, depth: await queueDepth(runtime.queue(workspace)) })),
    ),
  ]);
  const runsByStatus = Object.fromEntries(statusTotals) as Record<RunStatus, number>;
  // A counter without a workspace label cannot be shown to be the served workspaces' own.
  const counters =
    served === null
      ? allCounters
      : allCounters.filter((c) => c.labels.workspace !== undefined && served.has(c.labels.workspace));
  return { counters, rows, runsByStatus, durations, queues };
}

/**
 * A dedicated prom-client registry whose metrics are read at scrape time: counters that worker
 * processes keep in Redis (so the whole fleet shows, not this process), plus gauges computed
 * from the run store and the queues. Nothing is kept between scrapes but a short cache.
 */
export function createMetricsRegistry(given: DashboardMetricsOptions): Registry {
  const options = resolveSettings(given, {
    durationRuns: DEFAULTS.dashboard.metricsDurationRuns,
    maxRunsSummed: DEFAULTS.dashboard.metricsMaxRunsSummed,
    cacheMs: DEFAULTS.dashboard.metricsCacheMs,
  });
  const registry = new Registry();
  const { cacheMs } = options;
  let cached: { at: number; value: Promise<Snapshot> } | null = null;
  const snapshot = (): Promise<Snapshot> => {
    const now = Date.now();
    if (cached === null || now - cached.at > cacheMs) {
      const value = readSnapshot(options);
      // A failed read must not be served again from the cache.
      value.catch(() => {
        if (cached?.value === value) cached = null;
      });
      cached = { at: now, value };
    }
    return cached.value;
  };

  const fromRedis = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Counter<L>({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const snap = await snapshot();
        this.reset();
        for (const sample of snap.counters) {
          if (sample.metric !== name) continue;
          const labels = Object.fromEntries(labelNames.map((l) => [l, sample.labels[l] ?? ''])) as Record<L, string>;
          this.inc(labels, sample.value);
        }
      },
    });
  fromRedis(METRIC.requests, 'CRM API calls made by workers, by HTTP status (or "network")', [
    'workspace',
    'operation',
    'status',
  ]);
  fromRedis(METRIC.rateLimited, 'CRM answers 429 Too Many Requests', ['workspace']);
  fromRedis(METRIC.retries, 'Transient failures (5xx, timeouts, resets) that were retried', ['workspace', 'operation']);
  fromRedis(METRIC.rows, 'Final row results written by workers', ['workspace', 'operation', 'status']);

  new Gauge({
    name: 'crm_sync_rows',
    help: 'Rows of recorded runs by result (queued = waiting for one), summed over runs',
    labelNames: ['operation', 'status'] as const,
    registers: [registry],
    async collect() {
      const snap = await snapshot();
      this.reset();
      for (const r of snap.rows.values()) this.set({ operation: r.operation, status: r.status }, r.value);
    },
  });
  new Gauge({
    name: 'crm_sync_runs',
    help: 'Runs by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const snap = await snapshot();
      for (const status of RUN_STATUSES) this.set({ status }, snap.runsByStatus[status]);
    },
  });
  new Gauge({
    name: 'crm_sync_queue_jobs',
    help: 'Jobs in a workspace queue by state',
    labelNames: ['workspace', 'state'] as const,
    registers: [registry],
    async collect() {
      const snap = await snapshot();
      this.reset();
      for (const { workspace, depth } of snap.queues) {
        for (const state of ['waiting', 'active', 'delayed', 'failed'] as const)
          this.set({ workspace, state }, depth[state]);
      }
    },
  });
  new Gauge({
    name: 'crm_sync_queue_paused',
    help: '1 when the workspace queue is paused (by an operator or a refused API key)',
    labelNames: ['workspace'] as const,
    registers: [registry],
    async collect() {
      const snap = await snapshot();
      this.reset();
      for (const { workspace, depth } of snap.queues) this.set({ workspace }, depth.paused ? 1 : 0);
    },
  });
  new Histogram({
    name: 'crm_sync_run_duration_seconds',
    help: 'Wall time of recently finished runs (the newest 500 by default)',
    labelNames: ['operation'] as const,
    buckets: [1, 5, 15, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600],
    registers: [registry],
    async collect() {
      const snap = await snapshot();
      this.reset();
      for (const d of snap.durations) this.observe({ operation: d.operation }, d.seconds);
    },
  });
  return registry;
}
