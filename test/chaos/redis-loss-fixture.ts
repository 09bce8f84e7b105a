import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, expect } from 'vitest';
import { startPrivateRedis, type PrivateRedis, type PrivateRedisOptions } from '../../src/runtime/index.js';
import type { RunRecord } from '../../src/runs/index.js';
import { captureLogger } from '../helpers/log-capture.js';
import { csv, startHarness, type Harness, type HarnessOptions } from '../helpers/pipeline.js';
import { harnessArgs, runCli, startCli, type RunningCli } from '../helpers/run-cli.js';

/*
 * What the Redis-loss files (redis-loss, redis-evicts, redis-evicts-mid-file-*) and
 * redis-full-producer share: each test on a private redis-server of its own (no test touches the
 * shared Redis's config), with `crm-sync import` as a child process. The files are split so that
 * vitest runs them side by side: their tests wait (on child processes, evictions, the advised
 * imports), they do not compute.
 */

export interface RedisLossFixture {
  /** A private redis-server, stopped after the test. */
  privateRedis(options?: PrivateRedisOptions): Promise<PrivateRedis>;
  /** A harness on `redisUrl`, closed after the test. */
  harness(options: HarnessOptions): Promise<Harness>;
  /** An admin connection, its eviction settings put back after the test. */
  admin(url: string): Redis;
  /** A `crm-sync` child process, killed after the test if it still runs. */
  cli(args: string[], env: NodeJS.ProcessEnv): RunningCli;
}

/** Registers the per-test clean-up in the calling file and returns what its tests start things with. */
export function redisLossFixture(): RedisLossFixture {
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

  return {
    async privateRedis(options = {}) {
      redis = await startPrivateRedis(options);
      return redis;
    },
    async harness(options) {
      h = await startHarness(options);
      return h;
    },
    admin(url) {
      admin = new Redis(url);
      return admin;
    },
    cli(args, env) {
      const c = startCli(args, env);
      clis.push(c);
      return c;
    },
  };
}

/** The run the child import made (the only one of the harness's workspace). */
export async function theRun(harness: Harness, until: (r: RunRecord) => boolean): Promise<RunRecord> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const id = (await harness.runtime.store.listRuns({ workspace: 'acme' }).catch(() => null))?.runs[0]?.id;
    const run = id ? await harness.runtime.store.getRun(id).catch(() => null) : null;
    if (run && until(run)) return run;
    if (Date.now() > deadline) throw new Error(`no run got there: ${JSON.stringify(run?.counts)}`);
    await sleep(50);
  }
}

export async function exitOf(cli: RunningCli, ms: number): Promise<number | null> {
  const late = sleep(ms).then(() => 'late' as const);
  const code = await Promise.race([cli.exited, late]);
  if (code === 'late') throw new Error(`crm-sync did not exit in ${ms} ms\n${cli.stderr}`);
  return code;
}

/** The title of the eviction-while-reading test, one file per policy. */
export const EVICT_MID_FILE =
  'the producer notices it, the run is failed by its key, no queued row of it is sent after, and the reconciled import it advises makes no duplicate at once';

/**
 * Redis evicting while the file is still read. allkeys-lru may take the run's own record and
 * index entries (as the tester's did: the run was then found by no watch); volatile-lru over
 * filler keys with a TTL takes only those, so the run's record stays and the old run's queued
 * jobs are there to be sent once noeviction is back.
 */
export async function evictWhileReading(
  f: RedisLossFixture,
  policy: 'allkeys-lru' | 'volatile-lru',
  filler: boolean,
): Promise<void> {
  const redis = await f.privateRedis();
  const admin = f.admin(redis.url);
  // The import waits out a request timeout after it fails the run (requests on the wire end):
  // 2 s here, against a CRM answering in 10 ms, not the production 15 s.
  const h = await f.harness({ records: 5, latencyMs: 10, redisUrl: redis.url, requestTimeoutMs: 2000 });
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
  const cli = f.cli(
    harnessArgs(h, ['import', file, '--op', 'deal.create', '-w', 'acme', '--wait', '--high-water', '600']).args,
    { ...h.env, CI: 'true' },
  );
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
  const ours = () => [...h.ws.deals.values()].filter((d) => d.name.startsWith(`${tag} `));
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
  // More workers for the advised import than the two that kept the first one's producer waiting
  // mid-file: its 3000 creates would take half a minute through two, and more of them sending at
  // once can only make a duplicate likelier, never hide one.
  await h.startWorkers({ concurrency: 8 });
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
}
