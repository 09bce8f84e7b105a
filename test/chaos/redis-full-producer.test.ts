import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { hasRedisServer } from '../../src/runtime/index.js';
import type { RunRecord } from '../../src/runs/index.js';
import { csv, type Harness } from '../helpers/pipeline.js';
import { harnessArgs, type RunningCli } from '../helpers/run-cli.js';
import { exitOf, redisLossFixture } from './redis-loss-fixture.js';

/*
 * `import --wait` whose producer meets a full Redis (maxmemory, noeviction) mid-file, with no
 * worker yet: it says why it waits in one line and goes on by itself once Redis has room; full
 * for longer than --redis-outage, it stops as an outage does (exit 5) with the resume advice and
 * counts that match the run's record. A private redis-server each (the shared one is not touched).
 */
const f = redisLossFixture();
let h: Harness | undefined;
let admin: Redis | undefined;

/** Starts an import of `n` creates into a Redis with only `roomBytes` to spare; answers when it is full. */
async function importIntoFullRedis(n: number, roomBytes: number, extra: string[]): Promise<RunningCli> {
  const redis = await f.privateRedis();
  admin = f.admin(redis.url);
  h = await f.harness({ records: 5, latencyMs: 5, redisUrl: redis.url });
  const tag = `Full ${Date.now().toString(36)}`;
  const file = h.file(
    'full-producer.csv',
    csv(
      ['name', 'value'],
      Array.from({ length: n }, (_, i) => [`${tag} ${i + 1} ${'x'.repeat(200)}`, 100 + i]),
    ),
  );
  const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1]);
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  await admin.config('SET', 'maxmemory', String(used + roomBytes));
  const cli = f.cli(harnessArgs(h, ['import', file, '--op', 'deal.create', '-w', 'acme', '--wait', ...extra]).args, {
    ...h.env,
    CI: 'true',
  });
  const deadline = Date.now() + 30_000;
  while (!/Redis is full/.test(cli.stderr)) {
    if (cli.child.exitCode !== null || Date.now() > deadline)
      throw new Error(`the import never said Redis is full:\n${cli.stderr}`);
    await sleep(100);
  }
  return cli;
}

async function onlyRun(harness: Harness): Promise<RunRecord> {
  const id = (await harness.runtime.store.listRuns({ workspace: 'acme' })).runs[0]?.id;
  if (!id) throw new Error('no run');
  return harness.runtime.store.requireRun(id);
}

describe.skipIf(!hasRedisServer() && !process.env.CI)('the producer meeting a full Redis', () => {
  it('says why it waits in one line and goes on by itself once Redis has room', async () => {
    const cli = await importIntoFullRedis(3000, 1_500_000, []);
    await sleep(3000);
    expect(cli.child.exitCode).toBeNull();
    await admin!.config('SET', 'maxmemory', '0');
    // Read to the end with no worker: the run counts every row queued.
    const deadline = Date.now() + 30_000;
    let run = await onlyRun(h!);
    while (!run.producerDone && Date.now() < deadline) {
      await sleep(200);
      run = await onlyRun(h!);
    }
    const said = cli.stderr;
    console.log(
      `[redis-full-producer] room made: run ${JSON.stringify(run.counts)} producerDone ${run.producerDone}; said:\n${said}`,
    );
    expect(run.producerDone).toBe(true);
    expect(run.counts).toMatchObject({ total: 3000, queued: 3000 });
    expect(said.match(/Redis is full \(maxmemory reached\): the producer waits for room/g)).toHaveLength(1);
    expect(said).not.toMatch(/runs resume|REDIS_FULL\]/);
    await h!.startWorkers({ concurrency: 8 });
    expect(await exitOf(cli, 90_000)).toBe(0);
  }, 150_000);

  it('full for longer than --redis-outage: exits 5 with the resume advice, its counts those of the run', async () => {
    const cli = await importIntoFullRedis(3000, 1_500_000, ['--redis-outage', '3']);
    const code = await exitOf(cli, 60_000);
    await admin!.config('SET', 'maxmemory', '0');
    const run = await onlyRun(h!);
    const said = cli.stderr;
    console.log(
      `[redis-full-producer] stayed full: exit ${code}; run ${run.status} ${JSON.stringify(run.counts)}; said:\n${said}`,
    );
    expect(code).toBe(5);
    expect(said).toContain(`crm-sync runs resume ${run.id}`);
    expect(said).toContain('[REDIS_FULL]');
    const m = /(\d+) rows read, (\d+) of them in the queue(?:; the run counts (\d+) more as queued)?/.exec(said);
    expect(m).not.toBeNull();
    const [, , inQueue, more] = m!;
    expect(Number(inQueue) + Number(more ?? 0)).toBe(run.counts.queued);
  }, 120_000);
});
