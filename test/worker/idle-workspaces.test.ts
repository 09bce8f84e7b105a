import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config/index.js';
import { workBoardKey } from '../../src/keys/index.js';
import { importFile } from '../../src/lifecycle/index.js';
import { WorkBoard } from '../../src/queue/index.js';
import { openRuntime } from '../../src/runtime/index.js';
import { silentLogger } from '../../src/log/index.js';
import type { WorkerPool } from '../../src/worker/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** Adds workspaces (simulator and config file) that answer with the harness's key. */
function addWorkspaces(harness: Harness, names: string[]): Config {
  const raw = JSON.parse(readFileSync(harness.configPath, 'utf8')) as { workspaces: Record<string, object> };
  const acme = raw.workspaces.acme!;
  for (const name of names) {
    harness.sim.addWorkspace({ name, apiKeys: [harness.apiKey], records: 5, seed: 3 });
    raw.workspaces[name] = { ...acme, baseUrl: harness.sim.baseUrl(name) };
  }
  writeFileSync(harness.configPath, JSON.stringify(raw, null, 2));
  return loadConfig({ path: harness.configPath, env: harness.env });
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not so after ${ms} ms: ${what}`);
    await sleep(50);
  }
}

async function importTo(harness: Harness, config: Config, workspace: string) {
  const runtime = await openRuntime(config, silentLogger);
  try {
    const sim = harness.sim.workspace(workspace);
    const rows = [...sim.deals.values()].slice(0, 3).map((d) => [d.id, `${workspace} renamed`]);
    const file = harness.file(`${workspace}.csv`, csv(['id', 'name'], rows));
    const { run } = await importFile({
      file,
      op: 'deal.update',
      workspace,
      queue: runtime.queue(workspace),
      store: runtime.store,
    });
    return run;
  } finally {
    await runtime.close();
  }
}

describe('idle workspaces (docs/architecture.md, "Idle workspaces")', () => {
  it('a pool serving 30 workspaces holds a BullMQ worker only for the one with work, and closes it once idle', async () => {
    h = await startHarness({ records: 5 });
    const names = Array.from({ length: 29 }, (_, i) => `w${String(i).padStart(2, '0')}`);
    const config = addWorkspaces(h, names);
    const pool: WorkerPool = await h.startWorkers({ config, idleMs: 300 });
    const queue = h.runtime.queue('acme');
    await pool.refresh();
    expect(pool.active.size).toBe(0);
    // BullMQ's own worker list (CLIENT LIST): nobody blocks on an idle queue.
    expect(await queue.getWorkers()).toHaveLength(0);

    const run = await importTo(h, config, 'w07');
    await until('w07 has a worker', () => pool.active.has('w07'));
    expect([...pool.active.keys()]).toEqual(['w07']);
    expect((await h.waitForRun(run.id)).counts).toMatchObject({ total: 3, succeeded: 3 });
    expect([...h.sim.workspace('w07').deals.values()].filter((d) => d.name === 'w07 renamed')).toHaveLength(3);

    await until('w07 worker closed', () => pool.active.size === 0);
    const redis = h.runtime.redis;
    expect(await redis.zscore(workBoardKey(h.config.prefix), 'w07')).toBeNull();
    expect(await h.runtime.queue('acme').getWorkers()).toHaveLength(0);
  }, 60_000);

  it('a signal wakes a pool at once: with its poll a minute away, the run is taken and done', async () => {
    h = await startHarness({ records: 5 });
    const config = addWorkspaces(h, ['w01']);
    // The first look at the board is made at start; the next would be a minute later.
    const pool: WorkerPool = await h.startWorkers({ config, pollMs: 60_000, idleMs: 60_000 });
    // Subscribed (Redis counts the pool's subscriber), so the signal below cannot go unheard.
    const channel = `${workBoardKey(h.config.prefix)}:signals`;
    const subscribers = async () => ((await h!.runtime.redis.pubsub('NUMSUB', channel)) as [string, number])[1];
    await until('the pool subscribed to work signals', async () => (await subscribers()) === 1);
    expect(pool.active.size).toBe(0);
    const run = await importTo(h, config, 'w01');
    expect((await h.waitForRun(run.id)).counts).toMatchObject({ total: 3, succeeded: 3 });
    expect([...pool.active.keys()]).toEqual(['w01']);
  }, 30_000);

  it('a workspace added to the config file after the pool started is served without a restart', async () => {
    h = await startHarness({ records: 5 });
    const pool = await h.startWorkers({ reloadConfig: () => loadConfig({ path: h!.configPath, env: h!.env }) });
    const config = addWorkspaces(h, ['late']);
    const run = await importTo(h, config, 'late');
    expect((await h.waitForRun(run.id)).counts).toMatchObject({ total: 3, succeeded: 3 });
    expect(pool.active.has('late')).toBe(true);
  }, 60_000);

  it('the board keeps a workspace whose signal came after the count a settle read (no lost wake-up)', async () => {
    h = await startHarness({ records: 1 });
    const board = new WorkBoard({ redis: h.runtime.redis, prefix: h.config.prefix });
    await board.signal('acme');
    const seen = (await board.listed()).get('acme')!;
    // A producer adds jobs and signals between the idle check and the settle.
    await board.signal('acme');
    expect(await board.settle('acme', seen)).toBe(false);
    const now = (await board.listed()).get('acme')!;
    expect(await board.settle('acme', now)).toBe(true);
    expect((await board.listed()).has('acme')).toBe(false);
  });

  it('a pool does not close a worker while a run of its workspace is still running (a producer still reading)', async () => {
    h = await startHarness({ records: 5 });
    const pool = await h.startWorkers({ idleMs: 100 });
    const store = h.runtime.store;
    const run = await store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'slow.csv' });
    await new WorkBoard({ redis: h.runtime.redis, prefix: h.config.prefix }).signal('acme');
    await until('acme has a worker', () => pool.active.has('acme'));
    await sleep(1000);
    expect(pool.active.has('acme')).toBe(true);
    await store.finishProducing(run.id);
    await until('acme worker closed', () => !pool.active.has('acme'));
  }, 30_000);

  it('a running run whose producer died before it queued or signalled anything is still failed by a worker', async () => {
    h = await startHarness({ records: 5 });
    // Created and never produced: the producer was killed before its first signal.
    const run = await h.runtime.store.createRun({ workspace: 'acme', operation: 'deal.update', source: 'lost.csv' });
    expect((await new WorkBoard({ redis: h.runtime.redis, prefix: h.config.prefix }).listed()).size).toBe(0);
    const pool = await h.startWorkers({ producerSilenceMs: 500, sweepIntervalMs: 200 });
    const failed = await h.waitForRun(run.id, 15_000);
    expect(failed.status).toBe('failed');
    expect(pool.active.has('acme')).toBe(true);
  }, 30_000);
});
