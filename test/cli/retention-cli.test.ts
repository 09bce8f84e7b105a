import { existsSync, mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failed, succeeded } from '../../src/runs/index.js';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 5 });
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);
const DAY = 86_400_000;

/** A run made `daysAgo` days ago with `rows` results (every tenth failed), ended unless `running`. */
async function oldRun(daysAgo: number, rows: number, running = false, source = 'old.csv') {
  const { store } = h.runtime;
  const run = await store.createRun({
    workspace: 'acme',
    operation: 'deal.update',
    source,
    columns: ['id', 'name'],
    createdAt: new Date(Date.now() - daysAgo * DAY),
  });
  const results = Array.from({ length: rows }, (_, i) =>
    (i + 1) % 10 === 0
      ? failed(
          { row: i + 1, line: i + 2 },
          { code: 'CRM_NOT_FOUND', message: 'no such deal', httpStatus: 404 },
          { id: `del_${i}`, name: 'Old' },
        )
      : succeeded({ row: i + 1, line: i + 2 }, `del_${i}`),
  );
  await store.recordResults(run.id, results, { fromQueue: false });
  if (!running) await store.finishProducing(run.id);
  return run.id;
}

describe('retention (child processes)', () => {
  it('runs prune archives expired runs, removes them from Redis and old CSV files; show and export read the archive', async () => {
    const dir = h.config.resultsDir;
    // Copies of stdin (`import -`) as old as their runs: one read by an ended run, one by a run
    // still running (its resume reads the copy, so it stays).
    const spool = join(dir, 'stdin');
    mkdirSync(spool, { recursive: true });
    const endedCopy = join(spool, 'stdin-ended.ndjson');
    const runningCopy = join(spool, 'stdin-running.ndjson');
    const expired = await oldRun(40, 250, false, endedCopy);
    const fresh = await oldRun(2, 10);
    const stillRunning = await oldRun(40, 5, true, runningCopy);
    const oldCsv = join(dir, 'nightly-old-failed.csv');
    const newCsv = join(dir, 'nightly-new-failed.csv');
    const then = new Date(Date.now() - 40 * DAY);
    for (const file of [oldCsv, newCsv, endedCopy, runningCopy]) writeFileSync(file, 'x\n');
    for (const file of [oldCsv, endedCopy, runningCopy]) utimesSync(file, then, then);

    const dry = await cli(['runs', 'prune', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(
      'would archive and remove 1 runs, 2 old files (CSV files, copies of stdin); 1 old runs still running or blocked were left alone',
    );
    expect(await h.runtime.store.getRun(expired)).not.toBeNull();
    expect(existsSync(oldCsv)).toBe(true);

    const pruned = await cli(['runs', 'prune']);
    expect(pruned.stdout).toContain('archived and removed 1 runs (250 result rows), 2 old files');
    expect(await h.runtime.store.getRun(expired)).toBeNull();
    expect(await h.runtime.redis.keys(`${h.config.prefix}:run:*:${expired}*`)).toEqual([]);
    expect(await h.runtime.store.getRun(fresh)).not.toBeNull();
    expect(await h.runtime.store.getRun(stillRunning)).not.toBeNull();
    expect(existsSync(oldCsv)).toBe(false);
    expect(existsSync(newCsv)).toBe(true);
    expect(existsSync(endedCopy)).toBe(false);
    expect(existsSync(runningCopy)).toBe(true);
    expect(existsSync(join(dir, 'archive', `${expired}.ndjson.gz`))).toBe(true);

    const shown = await cli(['runs', 'show', expired]);
    expect(shown.code).toBe(1);
    expect(shown.stdout).toMatch(/rows: 250 total, 225 succeeded, 0 skipped, 25 failed/);
    expect(shown.stdout).toContain('archived (no longer in Redis)');
    expect(shown.stdout).toMatch(/row 10 \(line 11\): failed HTTP 404: no such deal/);
    const exported = await cli(['runs', 'export', expired, '--failed', '--out', '-']);
    const lines = exported.stdout.trim().split('\n');
    expect(lines).toHaveLength(26);
    expect(lines[1]).toContain('del_9');
    const all = await cli(['runs', 'export', expired, '--out', '-']);
    expect(all.stdout.trim().split('\n')).toHaveLength(251);
  }, 90_000);

  it('runs delete refuses a running run, and archives then removes an ended one', async () => {
    const id = await oldRun(1, 3, true);
    const refused = await cli(['runs', 'delete', id]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('cancel it first');
    // This run has no producer (made by oldRun), and `runs cancel` waits up to 15 s for a
    // cancelled run's producer to say it is done: the test plays the producer that stops.
    const cancelling = cli(['runs', 'cancel', id]);
    for (let i = 0; i < 400 && (await h.runtime.store.requireRun(id)).status !== 'cancelled'; i++) await sleep(25);
    await h.runtime.store.finishProducing(id);
    expect((await cancelling).code).toBe(0);
    const deleted = await cli(['runs', 'delete', id]);
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toContain('3 results archived');
    expect(await h.runtime.store.getRun(id)).toBeNull();
    expect((await cli(['runs', 'show', id])).stdout).toMatch(/status: cancelled/);
  }, 60_000);

  it("the workers' housekeeping prunes expired runs on its own", async () => {
    const expired = await oldRun(31, 20);
    await h.runtime.redis.del(`${h.config.prefix}:housekeeping:lock`);
    const pool = await h.startWorkers({ housekeepingMs: 300 });
    try {
      const deadline = Date.now() + 10_000;
      while ((await h.runtime.store.getRun(expired)) !== null) {
        if (Date.now() > deadline) throw new Error('housekeeping did not prune the expired run');
        await sleep(100);
      }
      expect(existsSync(join(h.config.resultsDir, 'archive', `${expired}.ndjson.gz`))).toBe(true);
    } finally {
      await pool.close();
    }
  }, 30_000);
});
