import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { configFromObject, type Config } from '../../src/config/index.js';
import type { Operation } from '../../src/crm/index.js';
import { silentLogger } from '../../src/log/index.js';
import { importFile, type ImportFileOptions } from '../../src/lifecycle/index.js';
import type { RunRecord } from '../../src/runs/index.js';
import { deleteKeysWithPrefix, openRuntime, type Runtime } from '../../src/runtime/index.js';
import {
  startSimulator,
  type SimFaults,
  type SimRateLimit,
  type Simulator,
  type SimWorkspace,
  type SimWorkspaceOptions,
} from '../../src/sim/index.js';
import { startWorkerPool, type WorkerPool, type WorkerPoolOptions } from '../../src/worker/index.js';
import { startCrmFaultProxy, type CrmFaultProxy } from './crm-fault-proxy.js';
import { TEST_REDIS_URL } from './redis.js';

export interface HarnessOptions {
  records?: number;
  seed?: number;
  /** The simulator's limit (what the CRM enforces). */
  simRateLimit?: SimRateLimit | null;
  /** What the config tells the workers (known limit); omit for adaptive. */
  knownRateLimit?: { max: number; durationMs: number };
  faults?: SimFaults;
  latencyMs?: number;
  redisUrl?: string;
  /** Seed nodes (`host:port,…`) of a Redis Cluster to use instead of a single Redis. Default none. */
  redisCluster?: string;
  /** Transient-retry policy written to the config. Default 6 attempts, 1000 ms. */
  retry?: { attempts: number; backoffMs: number };
  /** The workspace's createSettleMs. Default 200 ms here (30 s in production), so tests stay short. */
  createSettleMs?: number;
  /** The workspace's requestTimeoutMs. Default: the config's (15 s). */
  requestTimeoutMs?: number;
  /** Any other keys of the workspace's config (e.g. `outageWarningMs`), written last. Default none. */
  workspace?: Record<string, unknown>;
  /** Put a CRM fault proxy between the workers and the simulator (`h.proxy`). Default false. */
  crmProxy?: boolean;
  /** The workspace's circuit breaker settings. Default: the config's (5 in a row, probe every 15 s). */
  breaker?: { threshold?: number; probeEveryMs?: number };
  /** More of the simulator workspace's options (e.g. `pipelines` sharing a stage name). Default none. */
  simWorkspace?: Partial<Pick<SimWorkspaceOptions, 'pipelines' | 'normalise'>>;
  /** The workspace's baseUrl, from the simulator's (a proxy in front, a wrong path). Default: the simulator's. */
  baseUrl?: (simBaseUrl: string, sim: Simulator) => string | Promise<string>;
  /** Any other top-level keys of the config (e.g. `retention`), written last. Default none. */
  config?: Record<string, unknown>;
}

/**
 * A whole crm-sync deployment in one test: the simulator on an ephemeral port, a config file
 * pointing at it, a unique Redis key prefix (removed on close), a runtime, optional workers.
 */
export interface Harness {
  sim: Simulator;
  ws: SimWorkspace;
  /** The fault proxy in front of the simulator, with `crmProxy`. */
  proxy?: CrmFaultProxy;
  config: Config;
  configPath: string;
  /** Env a child `crm-sync` process needs (key variable and prefix). */
  env: NodeJS.ProcessEnv;
  dir: string;
  apiKey: string;
  runtime: Runtime;
  startWorkers(options?: Partial<WorkerPoolOptions>): Promise<WorkerPool>;
  file(name: string, content: string): string;
  importFile(path: string, op: Operation, extra?: Partial<ImportFileOptions>): Promise<RunRecord>;
  waitForRun(runId: string, timeoutMs?: number, until?: (r: RunRecord) => boolean): Promise<RunRecord>;
  close(): Promise<void>;
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const id = randomBytes(4).toString('hex');
  const apiKey = `test-key-${id}`;
  const keyEnv = `CRM_SYNC_TEST_KEY_${id.toUpperCase()}`;
  const prefix = `crm-sync-test-${id}`;
  process.env[keyEnv] = apiKey;
  const sim = await startSimulator({
    port: 0,
    workspaces: [
      {
        name: 'acme',
        apiKeys: [apiKey],
        records: options.records ?? 50,
        seed: options.seed ?? 7,
        rateLimit: options.simRateLimit ?? null,
        ...options.simWorkspace,
      },
    ],
    ...(options.latencyMs !== undefined ? { latencyMs: options.latencyMs } : {}),
    ...(options.faults ? { faults: options.faults } : {}),
  });
  const proxy = options.crmProxy ? await startCrmFaultProxy({ upstreamPort: sim.port }) : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'crm-sync-harness-'));
  const redisUrl = options.redisUrl ?? TEST_REDIS_URL;
  const raw = {
    redisUrl,
    ...(options.redisCluster ? { redisCluster: { nodes: options.redisCluster.split(',') } } : {}),
    resultsDir: join(dir, 'results'),
    workspaces: {
      acme: {
        baseUrl: options.baseUrl
          ? await options.baseUrl(sim.baseUrl('acme'), sim)
          : proxy
            ? proxy.baseUrl('acme')
            : sim.baseUrl('acme'),
        apiKeyEnv: keyEnv,
        ...(options.knownRateLimit ? { rateLimit: options.knownRateLimit } : {}),
        ...(options.retry ? { retry: options.retry } : {}),
        createSettleMs: options.createSettleMs ?? 200,
        ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
        ...(options.breaker ? { breaker: options.breaker } : {}),
        ...options.workspace,
      },
    },
    ...options.config,
  };
  const configPath = join(dir, 'crm-sync.config.json');
  writeFileSync(configPath, JSON.stringify(raw, null, 2));
  const env: NodeJS.ProcessEnv = { ...process.env, CRM_SYNC_PREFIX: prefix, [keyEnv]: apiKey, REDIS_URL: redisUrl };
  if (options.redisCluster) env.REDIS_CLUSTER_NODES = options.redisCluster;
  else delete env.REDIS_CLUSTER_NODES;
  const config = configFromObject(raw, { source: configPath, env, baseDir: dir });
  const runtime = await openRuntime(config, silentLogger);
  const pools: WorkerPool[] = [];

  const harness: Harness = {
    sim,
    ws: sim.workspace('acme'),
    ...(proxy ? { proxy } : {}),
    config,
    configPath,
    env,
    dir,
    apiKey,
    runtime,
    async startWorkers(extra = {}) {
      // The start-up key check is one list request; tests count requests, and check it on their own (test/cli/check-cli.test.ts).
      const pool = await startWorkerPool({
        config,
        logger: silentLogger,
        concurrency: 8,
        closeTimeoutMs: 5000,
        checkKey: false,
        // Tests queue work and expect it taken at once, not at the production poll of 1 s.
        pollMs: 100,
        ...extra,
      });
      pools.push(pool);
      return pool;
    },
    file(name, content) {
      const p = join(dir, name);
      writeFileSync(p, content);
      return p;
    },
    async importFile(path, op, extra = {}) {
      const rowsPerJob = config.workspaces.acme?.rowsPerJob;
      const { run } = await importFile({
        file: path,
        op,
        workspace: 'acme',
        queue: runtime.queue('acme'),
        store: runtime.store,
        rowsPerJob,
        ...extra,
      });
      return run;
    },
    async waitForRun(runId, timeoutMs = 20_000, until = (r) => r.status !== 'running') {
      const deadline = Date.now() + timeoutMs;
      let last = 'not read yet';
      for (;;) {
        // The test's own connection fails fast while Redis is down (restart tests): keep polling.
        const run = await runtime.store.requireRun(runId).catch((err: Error) => {
          last = err.message;
          return null;
        });
        if (run && until(run)) return run;
        if (run) last = `${run.status} ${JSON.stringify(run.counts)}`;
        if (Date.now() > deadline) throw new Error(`run ${runId} did not get there in ${timeoutMs} ms: ${last}`);
        await sleep(50);
      }
    },
    async close() {
      await Promise.all(pools.map((p) => p.close()));
      await runtime
        .queue('acme')
        .obliterate({ force: true })
        .catch(() => undefined);
      await deleteKeysWithPrefix(runtime.redis, prefix);
      await runtime.close();
      await proxy?.close();
      await sim.close();
      delete process.env[keyEnv];
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return harness;
}

/** Every row 1..total has exactly one final result. */
export async function resultsByRow(h: Harness, runId: string) {
  const rows = [];
  for await (const r of h.runtime.store.iterateResults(runId)) rows.push(r);
  return rows;
}

/** CSV text from rows of values (quotes every cell). */
export function csv(header: string[], rows: Array<Array<string | number>>): string {
  const q = (v: string | number) => `"${String(v).replaceAll('"', '""')}"`;
  return [header.map(q).join(','), ...rows.map((r) => r.map(q).join(','))].join('\n') + '\n';
}

/**
 * Network latency for a faulted create POST (fault proxy `delayMs`): the simulator stamps a deal
 * within a millisecond or two of the send, inside the record clock's measured uncertainty, where
 * a lost answer's deal cannot be told from a person's made just before (the row ends uncertain).
 */
export const FAULTED_POST_LATENCY = { delayMs: 150 };

/**
 * A few creates answered, so the workspace's record clock is calibrated (a workspace's very
 * first creates have none, and a lost answer's deal then leaves its row uncertain).
 */
export async function calibrateRecordClock(h: Harness): Promise<void> {
  // A few: the clock is known to within the fastest of their round trips.
  const rows = Array.from({ length: 5 }, (_, i) => [`Calibration ${Date.now()} ${i}`, 1]);
  const file = h.file(`calibrate-${Date.now()}.csv`, csv(['name', 'value'], rows));
  const run = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 20_000);
  if (run.counts.succeeded !== 5) throw new Error('the calibrating creates did not succeed');
}

/** An update file setting each deal's value to `base + i` (its id and name carried as they are). */
export function dealValuesFile(
  h: Pick<Harness, 'file'>,
  name: string,
  base: number,
  deals: ReadonlyArray<{ id: string; name: string }>,
): string {
  return h.file(
    name,
    csv(
      ['id', 'name', 'value'],
      deals.map((d, i) => [d.id, d.name, base + i]),
    ),
  );
}
