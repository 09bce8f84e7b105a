import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { resumeWords } from '../../src/cli/runs-actions.js';
import { resumeProducer } from '../../src/lifecycle/index.js';
import { hasRedisServer } from '../../src/runtime/index.js';
import { csv, resultsByRow } from '../helpers/pipeline.js';
import { harnessArgs, runCli } from '../helpers/run-cli.js';
import { exitOf, redisLossFixture, theRun } from './redis-loss-fixture.js';

/*
 * What the operator is told when Redis loses a run's data or goes away mid-file, each on a
 * private redis-server of its own, with `crm-sync import` as a child process and the words it
 * prints checked. Evictions: redis-evicts.test.ts and redis-evicts-mid-file-*.test.ts.
 */
const f = redisLossFixture();

describe.skipIf(!hasRedisServer() && !process.env.CI)('Redis losing a run', () => {
  it('restarted without persistence mid-file: import --wait says Redis lost the run and what was sent, exits 6, and the reconciled import it advises makes no duplicate', async () => {
    const redis = await f.privateRedis();
    const h = await f.harness({ records: 5, latencyMs: 15, redisUrl: redis.url });
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
    const cli = f.cli(
      harnessArgs(h, ['import', file, '--op', 'deal.create', '-w', 'acme', '--wait', '--high-water', '50']).args,
      { ...h.env, CI: 'true' },
    );
    // Mid-file: the producer queued its first chunk and waits for room; rows are reaching the CRM.
    await theRun(h, (r) => r.counts.succeeded >= 150);
    await redis.kill(true);
    await redis.restart();
    const code = await exitOf(cli, 60_000);
    const ours = () => [...h.ws.deals.values()].filter((d) => d.name.startsWith(`${tag} `));
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
    const redis = await f.privateRedis();
    const h = await f.harness({ records: 5, latencyMs: 40, redisUrl: redis.url });
    const tag = `Followed ${Date.now().toString(36)}`;
    const file = h.file(
      'followed.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: 300 }, (_, i) => [`${tag} ${i + 1}`, 7 + i]),
      ),
    );
    await h.startWorkers({ concurrency: 2 });
    const cli = f.cli(harnessArgs(h, ['import', file, '--op', 'deal.create', '-w', 'acme', '--wait']).args, {
      ...h.env,
      CI: 'true',
    });
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

  it('runs resume right after the import exits 5 (Redis away mid-file) works at once, and finishes the run with one result per row', async () => {
    const redis = await f.privateRedis({ appendOnly: true });
    const h = await f.harness({ records: 600, seed: 6, redisUrl: redis.url });
    const deals = [...h.ws.deals.values()];
    const file = h.file(
      'away.csv',
      csv(
        ['id', 'name'],
        deals.map((d, i) => [d.id, `Away ${i}`]),
      ),
    );
    // No workers: after its first 500-row chunk the import waits for room, mid-file.
    const cli = f.cli(
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
