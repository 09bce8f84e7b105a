import { execFileSync } from 'node:child_process';
import { createWriteStream, mkdirSync, writeFileSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunKeys } from '../../src/keys/index.js';
import type { RunRecord } from '../../src/runs/index.js';
import {
  loadDefinitions,
  openSyncQueue,
  runSync,
  startSyncScheduler,
  SYNC_JOB_NAME,
  type SyncDefinition,
  type SyncQueue,
} from '../../src/schedule/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { contactsCsv, writes } from '../reconcile/fixtures.js';

/**
 * What keeps a sync from overlapping itself or sending past an abort: blocked previous runs,
 * a lost sync lock, the producer's last chunk after an abort, a failing watch, a 401 while the
 * index is built, and a scheduler that must stop while a sync is still going.
 * No workers run unless a test starts them, so queued rows stay queued.
 */
describe('nightly sync safety', () => {
  let h: Harness;
  let queue: SyncQueue;
  let jobs: string;
  let data: string;
  const defined: Record<string, boolean> = {};

  /** A sync over its own file in which every 4th contact has a new phone number (10 of 40 rows). */
  const define = (name: string, extra: Record<string, unknown> = {}): SyncDefinition => {
    writeFileSync(
      join(data, `${name}.csv`),
      contactsCsv(h, (i) => i % 4 === 0, `+1 ${String(100 + Object.keys(defined).length)}-555-`).text,
    );
    defined[name] = true;
    const body = {
      name,
      workspace: 'acme',
      operation: 'contact.update',
      source: `../data/${name}.csv`,
      matchKey: 'email',
      schedule: { cron: '0 2 * * *', timezone: 'UTC' },
      ...extra,
    };
    writeFileSync(join(jobs, `${name}.json`), JSON.stringify(body));
    return loadDefinitions(jobs).find((d) => d.name === name)!;
  };
  const latestRun = async (sync: string): Promise<RunRecord | undefined> =>
    (await h.runtime.store.listRuns({ syncName: sync, limit: 1 })).runs[0];
  const until = async (check: () => Promise<boolean>, timeoutMs = 15_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await sleep(20);
    }
  };
  /** A named pipe as the sync's source: the test decides when rows arrive and when the file ends. */
  const pipeSource = (name: string): { path: string; open: () => WriteStream } => {
    const path = join(data, name);
    execFileSync('mkfifo', [path]);
    return { path, open: () => createWriteStream(path) };
  };
  const write = (out: WriteStream, text: string) =>
    new Promise<void>((resolve, reject) => out.write(text, (err) => (err ? reject(err) : resolve())));

  beforeAll(async () => {
    h = await startHarness({ records: 40, seed: 3, retry: { attempts: 1, backoffMs: 10 } });
    queue = openSyncQueue(h.runtime.redis, h.config.prefix);
    jobs = join(h.dir, 'jobs');
    data = join(h.dir, 'data');
    mkdirSync(jobs);
    mkdirSync(data);
  });
  afterAll(async () => {
    await queue?.obliterate({ force: true }).catch(() => undefined);
    await queue?.close();
    await h?.close();
  });

  it('skips ticks while the previous run is blocked, whether its tick still watches it or has returned', async () => {
    // The scheduler's way: the tick keeps the lock and watches the run through the block.
    const def = define('blocked-watched');
    const watched = runSync(def, { runtime: h.runtime, pollMs: 20 });
    await until(async () => (await latestRun('blocked-watched'))?.producerDone === true);
    const first = (await latestRun('blocked-watched'))!;
    await h.runtime.store.setStatus(first.id, 'blocked', 'test: the CRM refused the key');
    await sleep(100); // a few polls of the watch: it must not let go of the lock
    const second = await runSync(def, { runtime: h.runtime, pollMs: 20 });
    expect(second).toMatchObject({ skipped: true, status: 'completed' });
    expect(second.reason).toMatch(new RegExp(`^skipped: previous run ${first.id} is blocked`));
    await h.runtime.store.setStatus(first.id, 'running');
    const pool = await h.startWorkers();
    try {
      expect(await watched).toMatchObject({
        runId: first.id,
        status: 'completed',
        skipped: false,
        counts: { succeeded: 10, skipped: 30 },
      });
    } finally {
      await pool.close();
    }

    // The CLI's way: `schedule run` returns on the block, so the lock is free at the next tick.
    const cliDef = define('blocked-returned');
    const returned = runSync(cliDef, { runtime: h.runtime, pollMs: 20, returnWhenBlocked: true });
    await until(async () => (await latestRun('blocked-returned'))?.producerDone === true);
    const run = (await latestRun('blocked-returned'))!;
    await h.runtime.store.setStatus(run.id, 'blocked', 'test: the CRM refused the key');
    expect(await returned).toMatchObject({ runId: run.id, status: 'blocked', skipped: false });
    const next = await runSync(cliDef, { runtime: h.runtime, pollMs: 20 });
    expect(next.skipped).toBe(true);
    expect(next.reason).toMatch(new RegExp(`^skipped: previous run ${run.id} is blocked`));
    await h.runtime.store.setStatus(run.id, 'failed', 'test over');
  });

  it('a holder that loses its lock stops: the run is aborted, its queued rows removed and recorded, nothing sent', async () => {
    const def = define('lock-lost');
    h.ws.resetStats();
    const sync = runSync(def, { runtime: h.runtime, pollMs: 20, lockTtlMs: 300 });
    await until(async () => (await latestRun('lock-lost'))?.producerDone === true);
    // The lock lapsed and another scheduler took it.
    await h.runtime.redis.set(`${h.config.prefix}:sync:lock-lost:lock`, 'another-holder', 'PX', 60_000);
    const summary = await sync;
    expect(summary.status).toBe('failed');
    expect(summary.reason).toMatch(/^aborted: the sync lock expired and was taken over or removed/);
    const run = await h.runtime.store.requireRun(summary.runId);
    expect(run.counts).toMatchObject({ total: 40, queued: 0, skipped: 30, failed: 10 });
    const results = await resultsByRow(h, summary.runId);
    expect(results.filter((r) => r.code === 'RUN_ABORTED')).toHaveLength(10);
    expect(writes(h)).toBe(0);
    // The other holder's lock is left alone.
    expect(await h.runtime.redis.get(`${h.config.prefix}:sync:lock-lost:lock`)).toBe('another-holder');
  });

  it('fails an orphaned previous run (producer gone, lock free) and runs the tick', async () => {
    const def = define('orphan', { options: { dryRun: true } });
    const orphan = await h.runtime.store.createRun({
      workspace: 'acme',
      operation: 'contact.update',
      source: 'x.csv',
      syncName: 'orphan',
    });
    const summary = await runSync(def, { runtime: h.runtime, pollMs: 20 });
    expect(summary).toMatchObject({ skipped: false, status: 'completed', counts: { total: 40, skipped: 40 } });
    expect(await h.runtime.store.requireRun(orphan.id)).toMatchObject({
      status: 'failed',
      reason: 'its producer stopped before reading the whole file',
    });
  });

  it('after an abort, rows the producer still held are removed from the queue too: every row ends with one result', async () => {
    const contacts = [...h.ws.contacts.values()];
    const source = pipeSource('abort.csv');
    const def = define('abort-tail', { source: '../data/abort.csv', options: { maxFailures: 3 } });
    const sync = runSync(def, { runtime: h.runtime, pollMs: 20 });
    const out = source.open();
    const changed = (from: number, to: number) =>
      contacts.slice(from, to).map((c, i) => [c.name, c.email, `+1 222-555-${String(from + i).padStart(4, '0')}`]);
    const ghosts = Array.from({ length: 500 }, (_, i) => [`Ghost ${i}`, `ghost${i}@nowhere.example`, '']);
    // Rows 1-10 are real changes (held in the producer's chunk), then 500 unknown emails: their
    // results reach the store together and the watch aborts the run while the chunk is held.
    await write(out, csv(['name', 'email', 'phone_number'], [...changed(0, 10), ...ghosts]));
    await until(async () => (await latestRun('abort-tail'))?.status === 'failed');
    await write(out, csv(['name', 'email', 'phone_number'], changed(10, 15)).split('\n').slice(1).join('\n'));
    out.end();
    const summary = await sync;
    expect(summary.status).toBe('failed');
    expect(summary.reason).toMatch(/^aborted: \d+ rows failed \(maxFailures 3\)$/);
    const run = await h.runtime.store.requireRun(summary.runId);
    expect(run.counts).toMatchObject({ total: 515, queued: 0, failed: 515 });
    const results = await resultsByRow(h, summary.runId);
    expect(results.map((r) => r.row)).toEqual(Array.from({ length: 515 }, (_, i) => i + 1));
    expect(results.filter((r) => r.code === 'RUN_ABORTED').map((r) => r.row)).toEqual([
      ...Array.from({ length: 10 }, (_, i) => i + 1),
      511,
      512,
      513,
      514,
      515,
    ]);
    const waiting = await h.runtime.queue('acme').getJobs(['waiting', 'delayed', 'prioritized']);
    expect(waiting.filter((j) => j?.data.runId === summary.runId)).toEqual([]);
  });

  it('a watch that fails is handled at once (no unhandled rejection) and the tick fails with its error', async () => {
    const source = pipeSource('watch.csv');
    const def = define('watch-fails', { source: '../data/watch.csv' });
    const sync = runSync(def, { runtime: h.runtime, pollMs: 20 });
    const settled = sync.then(
      () => null,
      (err: unknown) => err,
    );
    const out = source.open();
    // The header comes first: it is checked against the mapping before the run is created.
    await write(out, csv(['name', 'email', 'phone_number'], []));
    await until(async () => (await latestRun('watch-fails')) !== undefined);
    const run = (await latestRun('watch-fails'))!;
    // The run disappears under the watch while the producer still waits for the rest of the file.
    await h.runtime.redis.del(new RunKeys(h.config.prefix).run(run));
    await sleep(100);
    out.end();
    const err = await settled;
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({ code: 'RUN_NOT_FOUND' });
  });

  it('a 401 while the index is built leaves the run blocked (not failed) and does not hold up the next tick', async () => {
    const def = define('index-401');
    h.ws.revokeApiKey(h.apiKey);
    let blocked;
    try {
      blocked = await runSync(def, { runtime: h.runtime, pollMs: 20 });
    } finally {
      h.ws.addApiKey(h.apiKey);
    }
    expect(blocked).toMatchObject({ status: 'blocked', skipped: false, counts: { total: 0 } });
    expect(blocked.reason).toMatch(
      /refused the API key of workspace "acme" \(HTTP 401.*while the reconcile index was being built.*run the sync again/,
    );
    h.ws.resetStats();
    const pool = await h.startWorkers();
    try {
      const next = await runSync(def, { runtime: h.runtime, pollMs: 20 });
      expect(next).toMatchObject({ skipped: false, status: 'completed', counts: { total: 40 } });
    } finally {
      await pool.close();
    }
  });

  it('the scheduler stops within its close timeout while a sync is still going; the run goes on', async () => {
    const def = define('long-sync');
    const scheduler = await startSyncScheduler({
      config: h.config,
      logger: h.runtime.logger,
      jobsDir: jobs,
      closeTimeoutMs: 200,
      runSync: { pollMs: 20 },
    });
    await queue.add(SYNC_JOB_NAME, { sync: def.name, file: def.file });
    await until(async () => (await latestRun('long-sync'))?.producerDone === true);
    const outcome = await Promise.race([
      scheduler.close().then(() => 'closed'),
      sleep(10_000).then(() => 'still waiting'),
    ]);
    expect(outcome).toBe('closed');
    expect((await latestRun('long-sync'))?.status).toBe('running');
  });
});
