import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { resumeWords } from '../../src/cli/runs-actions.js';
import { resumeProducer } from '../../src/lifecycle/index.js';
import { hasRedisServer, startPrivateRedis, type PrivateRedis } from '../../src/runtime/index.js';
import type { RunRecord } from '../../src/runs/index.js';
import type { WorkerPool } from '../../src/worker/index.js';
import { captureLogger } from '../helpers/log-capture.js';
import { csv, resultsByRow, startHarness, type Harness, dealValuesFile } from '../helpers/pipeline.js';
import { harnessArgs, runCli, startCli, type RunningCli } from '../helpers/run-cli.js';

/*
 * What the operator is told when Redis loses a run's data, evicts keys or goes away mid-file,
 * each on a private redis-server of its own (no test touches the shared Redis's config), with
 * `crm-sync import` as a child process and the words it prints checked.
 */

let h: Harness | undefined;
let redis: PrivateRedis | undefined;
let admin: Redis | undefined;
const clis: RunningCli[] = [];

afterEach(async () => {
  for (const c of clis.splice(0)) if (c.child.exitCode === null) c.child.kill('SIGKILL');
  await admin?.config('SET', 'maxmemory-policy', 'noeviction').catch(() => undefined);
  await admin?.config('SET', 'maxmemory', '0').catch(() => undefined);
  admin?.disconnect();
  await h?.close();
  await redis?.stop();
  h = undefined;
  redis = undefined;
  admin = undefined;
});

/** The run the child import made (the only one of the harness's workspace). */
async function theRun(harness: Harness, until: (r: RunRecord) => boolean): Promise<RunRecord> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const id = (await harness.runtime.store.listRuns({ workspace: 'acme' }).catch(() => null))?.runs[0]?.id;
    const run = id ? await harness.runtime.store.getRun(id).catch(() => null) : null;
    if (run && until(run)) return run;
    if (Date.now() > deadline) throw new Error(`no run got there: ${JSON.stringify(run?.counts)}`);
    await sleep(50);
  }
}

async function exitOf(cli: RunningCli, ms: number): Promise<number | null> {
  const late = sleep(ms).then(() => 'late' as const);
  const code = await Promise.race([cli.exited, late]);
  if (code === 'late') throw new Error(`crm-sync did not exit in ${ms} ms\n${cli.stderr}`);
  return code;
}

describe.skipIf(!hasRedisServer() && !process.env.CI)('Redis losing a run', () => {
  it('restarted without persistence mid-file: import --wait says Redis lost the run and what was sent, exits 6, and the reconciled import it advises makes no duplicate', async () => {
    redis = await startPrivateRedis();
    h = await startHarness({ records: 5, latencyMs: 15, redisUrl: redis.url });
    const n = 1200;
    const tag = `Lost ${Date.now().toString(36)}`;
    const file = h.file(
      'lost.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: n }, (_, i) => [`${tag} ${i + 1}`, 100 + i]),
      ),
    );
    await h.startWorkers({ concurrency: 4 });
    const cli = startCli(
      harnessArgs(h, ['import', file, '--op', 'deal.create', '-w', 'acme', '--wait', '--high-water', '50']).args,
      { ...h.env, CI: 'true' },
    );
    clis.push(cli);
    // Mid-file: the producer queued its first chunk and waits for room; rows are reaching the CRM.
    await theRun(h, (r) => r.counts.succeeded >= 150);
    await redis.kill(true);
    await redis.restart();
    const code = await exitOf(cli, 60_000);
    const ours = () => [...h!.ws.deals.values()].filter((d) => d.name.startsWith(`${tag} `));
    await sleep(500);
    const created = ours().length;
    const said = cli.stderr;
    console.log(`[redis-loss] exit ${code}; ${created} deals created before the loss; import said:\n${said}`);
    expect(code).toBe(6);
    expect(said).toMatch(
      /Redis lost run \S+ while it was under way: Redis lost its data \(restarted without persistence/,
    );
    const atLeast = Number(/at least (\d+) rows reached the CRM/.exec(said)?.[1]);
    // A lower bound from the import's last read (once a second), never more than the CRM got.
    expect(atLeast).toBeGreaterThan(0);
    expect(atLeast).toBeLessThanOrEqual(created);
    expect(said).toMatch(/Do NOT import the file again as it is/);
    expect(said).not.toMatch(/nothing was sent|no run with id|Rows not yet done were not sent/i);
    expect(said).toContain('[REDIS_DATA_LOST]');
    const advised = `crm-sync import ${file} -w acme --op deal.create --upsert --match name --wait`;
    expect(said).toContain(advised);
    expect(created).toBeGreaterThan(0);
    expect(created).toBeLessThan(n);

    // Following the advice: every name ends with exactly one deal.
    const again = await runCli(harnessArgs(h, advised.split(' ').slice(1)).args, { ...h.env, CI: 'true' }, 120_000);
    const byName = new Map<string, number>();
    for (const d of ours()) byName.set(d.name, (byName.get(d.name) ?? 0) + 1);
    const duplicates = [...byName.values()].filter((c) => c > 1).length;
    console.log(`[redis-loss] advised import exit ${again.code}; ${byName.size} names, ${duplicates} with duplicates`);
    expect(again.stderr).not.toMatch(/unexpected error/);
    expect(again.code).toBe(0);
    expect(duplicates).toBe(0);
    expect(byName.size).toBe(n);
  }, 180_000);

  it('restarted without persistence after the file was read: the follower says the same, exits 6, never "nothing was sent"', async () => {
    redis = await startPrivateRedis();
    h = await startHarness({ records: 5, latencyMs: 40, redisUrl: redis.url });
    const tag = `Followed ${Date.now().toString(36)}`;
    const file = h.file(
      'followed.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: 300 }, (_, i) => [`${tag} ${i + 1}`, 7 + i]),
      ),
    );
    await h.startWorkers({ concurrency: 2 });
    const cli = startCli(harnessArgs(h, ['import', file, '--op', 'deal.create', '-w', 'acme', '--wait']).args, {
      ...h.env,
      CI: 'true',
    });
    clis.push(cli);
    await theRun(h, (r) => r.producerDone && r.counts.succeeded >= 40);
    await redis.kill(true);
    await redis.restart();
    const code = await exitOf(cli, 60_000);
    const created = [...h.ws.deals.values()].filter((d) => d.name.startsWith(`${tag} `)).length;
    console.log(`[redis-loss] followed: exit ${code}; ${created} deals created; import said:\n${cli.stderr}`);
    expect(code).toBe(6);
    expect(cli.stderr).toMatch(
      /Redis lost run \S+ while it was under way: Redis lost its data \(restarted without persistence/,
    );
    expect(cli.stderr).toMatch(/300 rows had been handed to the workers/);
    const atLeast = Number(/at least (\d+) rows reached the CRM/.exec(cli.stderr)?.[1]);
    expect(atLeast).toBeGreaterThan(0);
    expect(atLeast).toBeLessThanOrEqual(created);
    expect(cli.stderr).toContain(`crm-sync import ${file} -w acme --op deal.create --upsert --match name --wait`);
    expect(cli.stderr).not.toMatch(/nothing was sent|no run with id|Rows not yet done were not sent/i);
  }, 120_000);

  it('switched to allkeys-lru mid-run: the workers stop taking jobs with one REDIS_EVICTS line, import --wait exits 6 with it, and the run goes on once noeviction is back', async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url);
    h = await startHarness({ records: 400, seed: 3, latencyMs: 15, redisUrl: redis.url });
    const { logger, lines } = captureLogger('info');
    const pool: WorkerPool = await h.startWorkers({ concurrency: 4, logger, evictionCheckMs: 200 });
    const deals = [...h.ws.deals.values()];
    const file = dealValuesFile(h, 'evict.csv', 9000, deals);
    const cli = startCli(harnessArgs(h, ['import', file, '--op', 'deal.update', '-w', 'acme', '--wait']).args, {
      ...h.env,
      CI: 'true',
    });
    clis.push(cli);
    const run = await theRun(h, (r) => r.counts.succeeded >= 50);
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const code = await exitOf(cli, 30_000);
    const held = await h.runtime.store.requireRun(run.id);
    await sleep(1000);
    const writesHeld = h.ws.stats.writes.dealUpdate;
    await sleep(1000);
    const writesLater = h.ws.stats.writes.dealUpdate;
    const evictLines = lines.filter((l) => /REDIS_EVICTS/.test(l.msg) && l.level === 50);
    console.log(
      `[redis-loss] evicting: exit ${code}; run ${held.status} (${held.reason}); ${evictLines.length} REDIS_EVICTS lines; stdout:\n${cli.stdout}`,
    );
    expect(code).toBe(6);
    expect(held.status).toBe('blocked');
    expect(held.reason).toMatch(/maxmemory-policy allkeys-lru\) \[REDIS_EVICTS\]/);
    expect(cli.stdout).toMatch(/status: blocked .*\[REDIS_EVICTS\]/);
    expect(cli.stdout).toMatch(/take it up again by themselves once Redis evicts no keys/);
    expect(cli.stdout).not.toMatch(/API key/);
    expect(evictLines).toHaveLength(1);
    expect(evictLines[0]?.msg).toMatch(/this worker stops taking jobs/);
    expect(writesLater - writesHeld).toBe(0);
    expect(lines.filter((l) => /row number >= 1/.test(String(l.err ?? l.msg)))).toEqual([]);

    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    const done = await h.waitForRun(run.id, 60_000, (r) => r.status === 'completed');
    expect(done.counts).toMatchObject({ total: 400, succeeded: 400, queued: 0 });
    expect((await resultsByRow(h, run.id)).map((r) => r.row)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
    expect(lines.some((l) => /Redis evicts no keys any more: taking jobs again/.test(l.msg))).toBe(true);
    await pool.close();
  }, 120_000);

  it('keys evicted mid-run: the run is failed naming REDIS_EVICTS with a way on, and no worker logs a flood of rowless results', async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url);
    h = await startHarness({ records: 2000, seed: 4, latencyMs: 10, redisUrl: redis.url });
    const { logger, lines } = captureLogger('info');
    await h.startWorkers({ concurrency: 4, logger, evictionCheckMs: 200 });
    const deals = [...h.ws.deals.values()];
    const file = dealValuesFile(h, 'evicted.csv', 3000, deals);
    const run = await h.importFile(file, 'deal.update');
    await h.waitForRun(run.id, 30_000, (r) => r.counts.succeeded >= 50);
    // Evict for real, but only keys of no run: volatile-lru takes keys with a TTL, and filler keys
    // with one are the least recently used; the run's own keys stay, so its end can be checked.
    const filler = admin.pipeline();
    for (let i = 0; i < 3000; i++) filler.set(`filler:${i}`, 'x'.repeat(1000), 'EX', 600);
    await filler.exec();
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1]);
    await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
    await admin.config('SET', 'maxmemory', String(used - 500 * 1024));
    await sleep(500);
    const evicted = Number(/evicted_keys:(\d+)/.exec(await admin.info('stats'))?.[1]);
    const ended = await h.waitForRun(run.id, 15_000, (r) => r.status !== 'running').catch(() => null);
    await sleep(1500);
    const rowless = lines.filter((l) => /row number >= 1/.test(`${String(l.err)} ${l.msg}`));
    const evictLines = lines.filter((l) => /REDIS_EVICTS/.test(l.msg) && l.level === 50);
    console.log(
      `[redis-loss] evicted ${evicted} keys; run ${ended?.status ?? 'gone'} (${ended?.reason}); ${evictLines.length} REDIS_EVICTS lines; ${rowless.length} rowless-result lines`,
    );
    expect(evicted).toBeGreaterThan(0);
    expect(ended).not.toBeNull();
    if (ended) {
      expect(ended.status).toBe('failed');
      expect(ended.reason).toMatch(
        /Redis evicted \d+ keys \(maxmemory-policy volatile-lru\) while this run was under way \[REDIS_EVICTS\]/,
      );
      expect(ended.reason).toMatch(/import the file again/);
    }
    expect(evictLines.length).toBeGreaterThanOrEqual(1);
    expect(evictLines.length).toBeLessThanOrEqual(2);
    expect(rowless).toEqual([]);
  }, 120_000);

  it('allkeys-lru evicting for real under import --wait: exit 6 naming REDIS_EVICTS, one line per worker, no flood of rowless results', async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url);
    h = await startHarness({ records: 3000, seed: 8, latencyMs: 10, redisUrl: redis.url });
    const { logger, lines } = captureLogger('info');
    // The production period (5 s): jobs whose data went are taken meanwhile.
    await h.startWorkers({ concurrency: 8, logger });
    const deals = [...h.ws.deals.values()];
    const file = dealValuesFile(h, 'lru.csv', 600, deals);
    const cli = startCli(harnessArgs(h, ['import', file, '--op', 'deal.update', '-w', 'acme', '--wait']).args, {
      ...h.env,
      CI: 'true',
    });
    clis.push(cli);
    await theRun(h, (r) => r.producerDone && r.counts.succeeded >= 50);
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1]);
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await admin.config('SET', 'maxmemory', String(Math.max(1024 * 1024, Math.floor(used * 0.8))));
    const code = await exitOf(cli, 60_000);
    await sleep(1000);
    const evicted = Number(/evicted_keys:(\d+)/.exec(await admin.info('stats'))?.[1]);
    const rowless = lines.filter((l) => /row number >= 1/.test(`${String(l.err)} ${l.msg}`));
    const evictLines = lines.filter((l) => /REDIS_EVICTS/.test(l.msg) && l.level === 50);
    const warnings = lines.filter((l) => l.level === 40);
    console.log(
      `[redis-loss] allkeys-lru: exit ${code}; evicted ${evicted} keys; ${evictLines.length} REDIS_EVICTS lines, ${rowless.length} rowless-result lines, ${warnings.length} warnings; said:\n${cli.stdout}${cli.stderr}`,
    );
    expect(evicted).toBeGreaterThan(0);
    expect(code).toBe(6);
    expect(`${cli.stdout}${cli.stderr}`).toMatch(/REDIS_EVICTS/);
    expect(cli.stderr).toMatch(
      /Redis lost keys of run \S+ while it was under way: Redis evicted \d+ keys \(maxmemory-policy allkeys-lru\)/,
    );
    expect(cli.stderr).toMatch(/at least \d+ rows reached the CRM/);
    expect(`${cli.stdout}${cli.stderr}`).not.toMatch(/nothing was sent|no run with id/i);
    expect(evictLines.length).toBeGreaterThanOrEqual(1);
    expect(evictLines.length).toBeLessThanOrEqual(2);
    expect(rowless).toEqual([]);
  }, 120_000);

  it('runs resume right after the import exits 5 (Redis away mid-file) works at once, and finishes the run with one result per row', async () => {
    redis = await startPrivateRedis({ appendOnly: true });
    h = await startHarness({ records: 600, seed: 6, redisUrl: redis.url });
    const deals = [...h.ws.deals.values()];
    const file = h.file(
      'away.csv',
      csv(
        ['id', 'name'],
        deals.map((d, i) => [d.id, `Away ${i}`]),
      ),
    );
    // No workers: after its first 500-row chunk the import waits for room, mid-file.
    const cli = startCli(
      harnessArgs(h, [
        'import',
        file,
        '--op',
        'deal.update',
        '-w',
        'acme',
        '--wait',
        '--high-water',
        '20',
        '--redis-outage',
        '1',
      ]).args,
      { ...h.env, CI: 'true' },
    );
    clis.push(cli);
    const run = await theRun(h, (r) => r.counts.queued >= 500);
    await redis.kill(true);
    const code = await exitOf(cli, 30_000);
    await redis.restart();
    expect(code).toBe(5);
    expect(cli.stderr).toContain(`crm-sync runs resume ${run.id}`);
    // The test's own connection reconnects first (waitForRun polls through that).
    const before = await h.waitForRun(run.id, 15_000, () => true);
    // Still "running" with a producer seen moments ago: only its exit tells it is gone.
    expect(before.status).toBe('running');
    expect(Date.now() - Date.parse(before.producerSeenAt ?? before.createdAt)).toBeLessThan(60_000);
    const { progress } = await resumeProducer({
      runId: run.id,
      queue: h.runtime.queue('acme'),
      store: h.runtime.store,
    });
    // The first chunk's 500 rows had no result: queued again, not read anew; 100 rows were unread.
    expect(progress.again).toBe(500);
    expect(progress.read - progress.again).toBe(100);
    expect(resumeWords(progress)).toBe(
      '100 rows not read before were read now (100 queued, 0 invalid); 500 earlier rows that had no result yet were queued again (counted once: a row in two jobs is still sent once)',
    );
    await h.startWorkers();
    const done = await h.waitForRun(run.id, 60_000);
    expect(done.counts).toMatchObject({ total: 600, succeeded: 600, queued: 0 });
    expect((await resultsByRow(h, run.id)).map((r) => r.row)).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
  }, 120_000);
});

describe.skipIf(!hasRedisServer() && !process.env.CI)('Redis evicting while the file is still read', () => {
  // allkeys-lru may take the run's own record and index entries (as the tester's did: the run was
  // then found by no watch); volatile-lru over filler keys with a TTL takes only those, so the
  // run's record stays and the old run's queued jobs are there to be sent once noeviction is back.
  it.each([
    ['allkeys-lru', false],
    ['volatile-lru', true],
  ] as const)(
    '%s: the producer notices it, the run is failed by its key, no queued row of it is sent after, and the reconciled import it advises makes no duplicate at once',
    async (policy, filler) => {
      redis = await startPrivateRedis();
      admin = new Redis(redis.url);
      h = await startHarness({ records: 5, latencyMs: 10, redisUrl: redis.url });
      const { logger, lines } = captureLogger('info');
      await h.startWorkers({ concurrency: 2, logger, evictionCheckMs: 200 });
      const n = 3000;
      const tag = `Evict ${Date.now().toString(36)}`;
      const file = h.file(
        'evict-mid-file.csv',
        csv(
          ['name', 'value'],
          Array.from({ length: n }, (_, i) => [`${tag} ${i + 1}`, 100 + i]),
        ),
      );
      // A small high-water mark: the producer waits for room mid-file, as 12,000 rows do at 10,000.
      const cli = startCli(
        harnessArgs(h, ['import', file, '--op', 'deal.create', '-w', 'acme', '--wait', '--high-water', '600']).args,
        { ...h.env, CI: 'true' },
      );
      clis.push(cli);
      const run = await theRun(h, (r) => r.counts.succeeded >= 100 && !r.producerDone);
      if (filler) {
        const fill = admin.pipeline();
        for (let i = 0; i < 3000; i++) fill.set(`filler:${i}`, 'x'.repeat(1000), 'EX', 600);
        await fill.exec();
      }
      const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1]);
      await admin.config('SET', 'maxmemory-policy', policy);
      await admin.config(
        'SET',
        'maxmemory',
        String(filler ? used - 500 * 1024 : Math.max(1024 * 1024, Math.floor(used * 0.6))),
      );
      const code = await exitOf(cli, 60_000);
      const evicted = Number(/evicted_keys:(\d+)/.exec(await admin.info('stats'))?.[1]);
      // The operator sets noeviction back: the workers take jobs again, the old run's among them.
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await admin.config('SET', 'maxmemory', '0');
      const ours = () => [...h!.ws.deals.values()].filter((d) => d.name.startsWith(`${tag} `));
      const atExit = ours().length;
      const said = cli.stderr;
      const after = await h.runtime.store.getRun(run.id).catch(() => null);
      const status = after ? { status: after.status, reason: after.reason } : null;
      console.log(
        `[redis-loss] evicted mid-file: exit ${code}; ${evicted} keys evicted; ${atExit} deals at exit; run ${JSON.stringify(status)}; import said:\n${said}`,
      );
      expect(evicted).toBeGreaterThan(0);
      expect(code).toBe(6);
      expect(said).toMatch(/Redis evicted keys while run \S+ was under way \[REDIS_EVICTS\]: the run is failed/);
      expect(said).toMatch(
        new RegExp(
          `Redis lost keys of run \\S+ while it was under way: Redis evicted \\d+ keys \\(maxmemory-policy ${policy}\\)`,
        ),
      );
      expect(said).toMatch(/Do NOT import the file again as it is/);
      expect(said).not.toMatch(/nothing was sent|no run with id/i);
      // The file was not read to its end: the producer stopped at the eviction.
      expect(atExit).toBeLessThan(n);
      if (status) {
        expect(status.status).toBe('failed');
        expect(status.reason).toMatch(/\[REDIS_EVICTS\]/);
      }

      // Right away, as the words allow: the reconciled import they advise.
      const advised = `crm-sync import ${file} -w acme --op deal.create --upsert --match name --wait`;
      expect(said).toContain(advised);
      const again = await runCli(harnessArgs(h, advised.split(' ').slice(1)).args, { ...h.env, CI: 'true' }, 150_000);
      await sleep(2000);
      const byName = new Map<string, number>();
      for (const d of ours()) byName.set(d.name, (byName.get(d.name) ?? 0) + 1);
      const duplicates = [...byName.values()].filter((c) => c > 1).length;
      const sentAfter = lines.filter((l) => /REDIS_EVICTS/.test(l.msg));
      console.log(
        `[redis-loss] advised import exit ${again.code}; ${byName.size} names, ${duplicates} with duplicates; ${sentAfter.length} REDIS_EVICTS worker lines`,
      );
      expect(again.stderr).not.toMatch(/unexpected error/);
      expect(duplicates).toBe(0);
      expect(byName.size).toBe(n);
      expect(again.code).toBe(0);
    },
    240_000,
  );
});
