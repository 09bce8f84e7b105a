import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisHealthWatch } from '../../src/cli/redis-health-watch.js';
import { hasRedisServer, startPrivateRedis, type PrivateRedis } from '../../src/runtime/index.js';
import { startWorkerPool, type WorkerPool } from '../../src/worker/index.js';
import { captureLogger } from '../helpers/log-capture.js';
import { startCli } from '../helpers/run-cli.js';
import { resultsByRow, startHarness, type Harness, dealValuesFile } from '../helpers/pipeline.js';

/*
 * Redis full (maxmemory, noeviction) when no job is being processed: the first thing refused is
 * BullMQ's own job fetch (moveToActive writes), which BullMQ reports only as a worker 'error' in a
 * tight loop. The workers must pause with one "Redis is full" line, a worker started into the
 * full Redis must wait with one line (not exit), and a follower must say why it waits.
 */
describe.skipIf(!hasRedisServer() && !process.env.CI)('Redis full before a job ran', () => {
  let redis: PrivateRedis;
  let h: Harness;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url);
    h = await startHarness({ records: 300, seed: 5, latencyMs: 10, redisUrl: redis.url });
  });
  afterAll(async () => {
    await admin?.config('SET', 'maxmemory', '0').catch(() => undefined);
    await h?.close();
    admin?.disconnect();
    await redis?.stop();
  });

  async function fill(): Promise<void> {
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1]);
    await admin.config('SET', 'maxmemory', String(Math.max(1024 * 1024, used - 64 * 1024)));
  }

  it('pauses on the fetch with one line, a worker started into it waits with one line, and the follower says why', async () => {
    const { logger, lines } = captureLogger('info');
    const pool = await startWorkerPool({
      config: h.config,
      logger,
      concurrency: 4,
      closeTimeoutMs: 2000,
      checkKey: false,
      pollMs: 100,
    });
    let late: Promise<WorkerPool> | undefined;
    const second = captureLogger('info');
    try {
      const deals = [...h.ws.deals.values()];
      const file = dealValuesFile(h, 'full-first.csv', 5000, deals);
      const run = await h.importFile(file, 'deal.update');
      await h.waitForRun(run.id, 20_000, (r) => r.counts.succeeded >= 20);
      const sync = pool.active.get('acme');
      expect(sync).toBeDefined();
      // No job in hand (a local pause waits for the active ones): the next Redis write is a fetch.
      await sync!.worker.pause();
      await fill();
      void sync!.worker.resume();
      await sleep(3000);
      const writesWhileFull = h.ws.stats.writes.dealUpdate;
      const fullLines = lines.filter((l) => /Redis is full/.test(l.msg));
      const warnings = lines.filter((l) => l.level === 40);

      // A worker process started now waits with one line instead of exiting.
      late = startWorkerPool({
        config: h.config,
        logger: second.logger,
        concurrency: 2,
        closeTimeoutMs: 2000,
        checkKey: false,
        pollMs: 100,
        fullProbeMs: 200,
      });
      let lateError: unknown;
      late.catch((err: unknown) => (lateError = err)).catch(() => undefined);
      // The follower's word while the rows wait. It looks at every progress tick (import-action's
      // watch): a look whose probe found a moment's room (a key expired under the limit) says
      // nothing, the next one speaks; a CI run failed on a single look.
      const follower = new RedisHealthWatch(h.runtime.store, 'acme');
      let said: string | undefined;
      for (let i = 0; i < 20 && said === undefined; i++) {
        said = await follower.look();
        if (said === undefined) await sleep(250);
      }
      // Its wait line once it is out (a loaded machine starts it slowly), then 1.5 s more in
      // which a repeat of the line, or a write, would show.
      const waitingBy = Date.now() + 20_000;
      while (!second.lines.some((l) => /waits to start until Redis has room/.test(l.msg)) && Date.now() < waitingBy)
        await sleep(100);
      await sleep(1500);
      const waitLines = second.lines.filter((l) => /waits to start until Redis has room/.test(l.msg));
      expect(h.ws.stats.writes.dealUpdate).toBe(writesWhileFull);

      await admin.config('SET', 'maxmemory', '0');
      const done = await h.waitForRun(run.id, 60_000);
      const latePool = await late;
      await latePool.close();
      const results = await resultsByRow(h, run.id);
      console.log(
        `[redis-full-first] "Redis is full" lines ${fullLines.length}, warnings while full ${warnings.length}, late worker wait lines ${waitLines.length}; run ${done.status} ${JSON.stringify(done.counts)}`,
      );
      expect(fullLines).toHaveLength(1);
      expect(fullLines[0]?.level).toBe(50);
      expect(warnings.length).toBeLessThan(5);
      expect(lateError).toBeUndefined();
      expect(waitLines).toHaveLength(1);
      expect(second.lines.some((l) => /Redis has room again: the worker started/.test(l.msg))).toBe(true);
      expect(said).toMatch(/^Redis is full \(maxmemory reached\): workers take no job until it has room/);
      expect(done.counts).toMatchObject({ total: 300, succeeded: 300, queued: 0 });
      expect(results.map((r) => r.row)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
      expect(lines.some((l) => /Redis has room again: taking jobs/.test(l.msg))).toBe(true);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
      await late?.then((p) => p.close()).catch(() => undefined);
      await pool.close();
    }
  }, 90_000);

  /** Fills Redis, starts `crm-sync worker` and waits (up to 20 s) for its line saying it waits. */
  async function workerIntoFullRedis(): Promise<ReturnType<typeof startCli>> {
    await fill();
    const worker = startCli(['--config', h.configPath, '--log-level', 'info', 'worker', '-w', 'acme'], h.env);
    const deadline = Date.now() + 20_000;
    while (!/waits to start until Redis has room/.test(worker.stdout + worker.stderr) && Date.now() < deadline)
      await sleep(100);
    return worker;
  }

  it('crm-sync worker started into a full Redis waits with one line (no stack trace, no exit), starts once it has room, and stops on SIGTERM', async () => {
    const worker = await workerIntoFullRedis();
    try {
      await sleep(1500);
      const whileFull = worker.stdout + worker.stderr;
      const exitedWhileFull = worker.child.exitCode;
      await admin.config('SET', 'maxmemory', '0');
      const started = Date.now() + 20_000;
      while (!/Redis has room again: the worker started/.test(worker.stdout + worker.stderr) && Date.now() < started)
        await sleep(100);
      const said = worker.stdout + worker.stderr;
      worker.child.kill('SIGTERM');
      const code = await worker.exited;
      console.log(`[redis-full-first] worker CLI: exit ${code}; said while full:\n${whileFull}`);
      expect(exitedWhileFull).toBeNull();
      expect(whileFull.match(/waits to start until Redis has room/g)).toHaveLength(1);
      expect(whileFull).not.toMatch(/unexpected error|\n\s+at /);
      expect(said).toMatch(/Redis has room again: the worker started/);
      expect(code).toBe(0);
    } finally {
      if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
      await admin.config('SET', 'maxmemory', '0');
    }
  }, 60_000);

  it('crm-sync worker waiting for room in a full Redis stops on SIGTERM at once, gracefully, having started nothing', async () => {
    const worker = await workerIntoFullRedis();
    try {
      const waiting = worker.child.exitCode === null && /waits to start/.test(worker.stdout + worker.stderr);
      const sent = Date.now();
      worker.child.kill('SIGTERM');
      const code = await worker.exited;
      const tookMs = Date.now() - sent;
      const said = worker.stdout + worker.stderr;
      console.log(`[redis-full-first] SIGTERM while waiting: exit ${code} after ${tookMs} ms`);
      expect(waiting).toBe(true);
      // Killed by the signal, exitCode is null; forced after the close deadline, it is 1.
      expect(code).toBe(0);
      expect(said).toMatch(/worker stopped before it started/);
      expect(said).not.toMatch(/Redis has room again|did not stop within|unexpected error|\n\s+at /);
    } finally {
      if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
      await admin.config('SET', 'maxmemory', '0');
    }
  }, 60_000);

  it('crm-sync scheduler in a full Redis says so once (not a line per tick fetch), and takes ticks again once it has room', async () => {
    await fill();
    const scheduler = startCli(['--config', h.configPath, '--log-level', 'info', 'scheduler'], h.env);
    try {
      const said = () => scheduler.stdout + scheduler.stderr;
      const deadline = Date.now() + 20_000;
      while (!/the scheduler stops taking sync ticks/.test(said()) && Date.now() < deadline) await sleep(100);
      await sleep(2000);
      const whileFull = said();
      await admin.config('SET', 'maxmemory', '0');
      const roomBy = Date.now() + 20_000;
      while (!/Redis has room again: taking sync ticks/.test(said()) && Date.now() < roomBy) await sleep(100);
      const afterRoom = said();
      scheduler.child.kill('SIGTERM');
      const code = await scheduler.exited;
      const errorLines = whileFull.match(/scheduler connection error/g)?.length ?? 0;
      console.log(`[redis-full-first] scheduler in a full Redis: ${errorLines} connection-error lines, exit ${code}`);
      // Before, it wrote ~7,000 "scheduler connection error (retrying)" lines a second.
      expect(whileFull.match(/the scheduler stops taking sync ticks/g)).toHaveLength(1);
      expect(errorLines).toBeLessThan(5);
      expect(afterRoom).toMatch(/Redis has room again: taking sync ticks/);
      expect(code).toBe(0);
    } finally {
      if (scheduler.child.exitCode === null) scheduler.child.kill('SIGKILL');
      await admin.config('SET', 'maxmemory', '0');
    }
  }, 60_000);
});
