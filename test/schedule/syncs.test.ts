import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  installSchedule,
  listSchedules,
  loadDefinitions,
  openSyncQueue,
  runSync,
  startSyncScheduler,
  syncSchedules,
  SYNC_JOB_NAME,
  type SyncDefinition,
  type SyncQueue,
  type SyncSummary,
} from '../../src/schedule/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { contactsCsv, writes } from '../reconcile/fixtures.js';

describe('nightly syncs', () => {
  let h: Harness;
  let queue: SyncQueue;
  let hook: Server;
  let hookUrl: string;
  const received: SyncSummary[] = [];
  let jobs: string;

  const define = (name: string, extra: Record<string, unknown> = {}): SyncDefinition => {
    const body = {
      name,
      workspace: 'acme',
      operation: 'contact.update',
      source: '../data/contacts-sync.csv',
      matchKey: 'email',
      schedule: { cron: '0 2 * * *', timezone: 'Europe/Berlin' },
      ...extra,
    };
    writeFileSync(join(jobs, `${name}.json`), JSON.stringify(body));
    return loadDefinitions(jobs).find((d) => d.name === name)!;
  };

  beforeAll(async () => {
    h = await startHarness({ records: 60, seed: 5 });
    await h.startWorkers();
    queue = openSyncQueue(h.runtime.redis, h.config.prefix);
    jobs = join(h.dir, 'jobs');
    mkdirSync(jobs);
    mkdirSync(join(h.dir, 'data'));
    writeFileSync(join(h.dir, 'data', 'contacts-sync.csv'), contactsCsv(h, (i) => i % 10 === 0).text);
    hook = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(JSON.parse(body) as SyncSummary);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    await queue?.obliterate({ force: true }).catch(() => undefined);
    await queue?.close();
    await new Promise((resolve) => hook?.close(resolve));
    await h?.close();
  });

  it('installs a schedule once however often it is installed, and sync removes the ones whose definition is gone', async () => {
    const def = define('twice');
    await installSchedule(queue, def);
    await installSchedule(queue, def);
    expect((await listSchedules(queue)).filter((s) => s.name === 'twice')).toEqual([
      expect.objectContaining({ name: 'twice', cron: '0 2 * * *', timezone: 'Europe/Berlin' }),
    ]);
    const gone = { ...def, name: 'gone' };
    await installSchedule(queue, gone);
    const { removed } = await syncSchedules(queue, [def]);
    expect(removed).toEqual(['gone']);
    expect((await listSchedules(queue)).map((s) => s.name)).toEqual(['twice']);
    expect(await queue.getJobSchedulersCount()).toBe(1);
  });

  it('skips a tick while the previous run of the same sync is still going, and records it', async () => {
    const def = define('overlap');
    // The workspace queue is paused: the first run stays running once its rows are queued.
    const workspaceQueue = h.runtime.queue('acme');
    await workspaceQueue.pause();
    let first: ReturnType<typeof runSync>;
    try {
      first = runSync(def, { runtime: h.runtime, pollMs: 50 });
      await waitFor(
        async () => (await h.runtime.store.listRuns({ syncName: 'overlap' })).runs[0]?.producerDone === true,
      );
      const second = await runSync(def, { runtime: h.runtime, pollMs: 50 });
      expect(second).toMatchObject({ skipped: true, status: 'completed' });
      expect(second.reason).toMatch(
        /^skipped: (previous run \S+ still running|a tick of this sync is still being handled)$/,
      );
    } finally {
      await workspaceQueue.resume();
    }
    const done = await first;
    expect(done).toMatchObject({
      skipped: false,
      status: 'completed',
      counts: { total: 60, succeeded: 6, skipped: 54 },
    });
    const history = await h.runtime.store.listRuns({ syncName: 'overlap' });
    expect(history.total).toBe(2);
    expect(history.runs[1]?.reason ?? '').toBe('');
    expect(history.runs[0]?.reason).toMatch(/^skipped: /);
  });

  it('a second run over an unchanged file sends nothing, and the summary is posted to the notify URL', async () => {
    const def = define('nightly-contacts', { options: { notifyUrl: hookUrl } });
    await runSync(def, { runtime: h.runtime, pollMs: 50 });
    h.ws.resetStats();
    const summary = await runSync(def, { runtime: h.runtime, pollMs: 50 });
    expect(writes(h)).toBe(0);
    expect(summary).toMatchObject({
      status: 'completed',
      counts: { total: 60, skipped: 60, succeeded: 0 },
      plan: { skip: 60, update: 0 },
    });
    expect(h.ws.stats.listPages).toBe(1); // 60 records fit one page, whose answer says it is the last
    expect(received.at(-1)).toEqual(JSON.parse(JSON.stringify(summary)));
    expect(received).toHaveLength(2);
  });

  it('aborts a run once maxFailures rows failed: the rest is not sent and the failed rows are written to a file', async () => {
    const contacts = [...h.ws.contacts.values()];
    const rows = [
      ...Array.from({ length: 4 }, (_, i) => [`Ghost ${i}`, `ghost${i}@nowhere.example`, '']),
      ...contacts.slice(0, 20).map((c, i) => [c.name, c.email, `+1 333-555-${String(i).padStart(4, '0')}`]),
    ];
    writeFileSync(join(h.dir, 'data', 'bad.csv'), csv(['name', 'email', 'phone_number'], rows));
    const def = define('aborting', { source: '../data/bad.csv', options: { maxFailures: 3 } });
    h.ws.resetStats();
    const summary = await runSync(def, { runtime: h.runtime, pollMs: 50 });
    expect(summary.status).toBe('failed');
    expect(summary.reason).toMatch(/^aborted: \d+ rows failed \(maxFailures 3\)$/);
    expect(writes(h)).toBe(0);
    const results = await resultsByRow(h, summary.runId);
    expect(results.filter((r) => r.code === 'RUN_ABORTED')).toHaveLength(20);
    expect(results.filter((r) => r.code === 'CRM_NOT_FOUND')).toHaveLength(4);
    expect(summary.failedRowsFile).toBeDefined();
    expect(readFileSync(summary.failedRowsFile!, 'utf8').trim().split('\n')).toHaveLength(25);
  });

  it('the scheduler process turns a tick into a reconciled run of the sync', async () => {
    const def = define('ticked');
    const scheduler = await startSyncScheduler({
      config: h.config,
      logger: h.runtime.logger,
      jobsDir: jobs,
      runSync: { pollMs: 50 },
    });
    try {
      await queue.add(SYNC_JOB_NAME, { sync: def.name, file: def.file });
      await waitFor(
        async () => (await h.runtime.store.listRuns({ syncName: 'ticked', status: 'completed' })).total === 1,
      );
      const [run] = (await h.runtime.store.listRuns({ syncName: 'ticked' })).runs;
      expect(run).toMatchObject({
        operation: 'contact.update',
        options: { reconcile: true, matchKey: 'email' },
        counts: { total: 60 },
      });
    } finally {
      await scheduler.close();
    }
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(25);
  }
}
