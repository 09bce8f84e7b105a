import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { hasRedisServer } from '../../src/runtime/index.js';
import type { WorkerPool } from '../../src/worker/index.js';
import { captureLogger } from '../helpers/log-capture.js';
import { resultsByRow, dealValuesFile } from '../helpers/pipeline.js';
import { harnessArgs } from '../helpers/run-cli.js';
import { exitOf, redisLossFixture, theRun } from './redis-loss-fixture.js';

/*
 * What the operator is told when Redis evicts keys mid-run, each on a private redis-server of
 * its own (no test touches the shared Redis's config), with `crm-sync import` as a child process
 * and the words it prints checked. Evictions while the file is still read:
 * redis-evicts-mid-file-*.test.ts; Redis losing its data: redis-loss.test.ts.
 */
const f = redisLossFixture();

describe.skipIf(!hasRedisServer() && !process.env.CI)('Redis evicting keys mid-run', () => {
  it('switched to allkeys-lru mid-run: the workers stop taking jobs with one REDIS_EVICTS line, import --wait exits 6 with it, and the run goes on once noeviction is back', async () => {
    const redis = await f.privateRedis();
    const admin = f.admin(redis.url);
    const h = await f.harness({ records: 400, seed: 3, latencyMs: 15, redisUrl: redis.url });
    const { logger, lines } = captureLogger('info');
    const pool: WorkerPool = await h.startWorkers({ concurrency: 4, logger, evictionCheckMs: 200 });
    const deals = [...h.ws.deals.values()];
    const file = dealValuesFile(h, 'evict.csv', 9000, deals);
    const cli = f.cli(harnessArgs(h, ['import', file, '--op', 'deal.update', '-w', 'acme', '--wait']).args, {
      ...h.env,
      CI: 'true',
    });
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
    const redis = await f.privateRedis();
    const admin = f.admin(redis.url);
    const h = await f.harness({ records: 2000, seed: 4, latencyMs: 10, redisUrl: redis.url });
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
    expectOnceEach(evictLines);
    expect(rowless).toEqual([]);
  }, 120_000);

  it('allkeys-lru evicting for real under import --wait: exit 6 naming REDIS_EVICTS, one line per worker, no flood of rowless results', async () => {
    const redis = await f.privateRedis();
    const admin = f.admin(redis.url);
    // The import waits out a request timeout once it sees keys evicted: 2 s here, not the production 15 s.
    const h = await f.harness({ records: 3000, seed: 8, latencyMs: 10, redisUrl: redis.url, requestTimeoutMs: 2000 });
    const { logger, lines } = captureLogger('info');
    // The production period (5 s): jobs whose data went are taken meanwhile.
    await h.startWorkers({ concurrency: 8, logger });
    const deals = [...h.ws.deals.values()];
    const file = dealValuesFile(h, 'lru.csv', 600, deals);
    const cli = f.cli(harnessArgs(h, ['import', file, '--op', 'deal.update', '-w', 'acme', '--wait']).args, {
      ...h.env,
      CI: 'true',
    });
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
    expectOnceEach(evictLines);
    expect(rowless).toEqual([]);
  }, 120_000);
});

/**
 * No flood: each thing a worker says of evictions is said once — the watch's "Redis evicts keys",
 * and, when the keys that went were the run's own or its jobs' (allkeys-lru takes any), "run …
 * is gone from Redis" and "a job came without its rows" — and nothing else is said at error level.
 */
function expectOnceEach(evictLines: Array<{ msg: string }>): void {
  const kinds = [/^Redis evicts keys/, /^run \S+ is gone from Redis/, /^a job came without its rows/];
  for (const line of evictLines)
    expect(
      kinds.some((k) => k.test(line.msg)),
      line.msg,
    ).toBe(true);
  for (const kind of kinds) expect(evictLines.filter((l) => kind.test(l.msg)).length).toBeLessThanOrEqual(1);
}
