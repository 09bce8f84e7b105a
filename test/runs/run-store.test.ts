import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCrmSyncError } from '../../src/errors/index.js';
import { RunKeys } from '../../src/keys/index.js';
import { LuaScript } from '../../src/redis/lua-script.js';
import { RunStore, type FinalRowStatus, type RowResult } from '../../src/runs/index.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import { testRedis } from './redis-fixture.js';

const { redis, prefix, cleanup } = testRedis();
const store = new RunStore({ redis, prefix });

afterAll(cleanup);

const at = '2026-11-23T03:55:12.345Z';

function result(row: number, status: FinalRowStatus, extra: Partial<RowResult> = {}): RowResult {
  const base: RowResult = { row, status, at, line: row + 1 };
  if (status === 'succeeded') base.recordId = `rec-${row}`;
  if (status === 'failed')
    Object.assign(base, { httpStatus: 422, code: 'CRM_REJECTED', message: `rejected row ${row}` });
  if (status === 'invalid')
    Object.assign(base, {
      code: 'ROW_INVALID',
      message: 'row is invalid',
      errors: [{ field: 'value', message: 'must be a number' }],
    });
  return { ...base, original: { id: String(row), name: `Deal ${row}` }, ...extra };
}

async function newRun(workspace = 'acme') {
  return store.createRun({ workspace, operation: 'deal.update', source: 'deals.csv', columns: ['id', 'name'] });
}

describe('create, get, list', () => {
  it('creates a running run with zero counts and reads it back', async () => {
    const run = await store.createRun({
      workspace: 'acme',
      operation: 'deal.create',
      source: 'in.csv',
      options: { format: 'csv', delimiter: ';' },
    });
    expect(run.status).toBe('running');
    expect(run.counts).toEqual({
      total: 0,
      queued: 0,
      succeeded: 0,
      failed: 0,
      skipped: 0,
      invalid: 0,
      superseded: 0,
      uncertain: 0,
      cancelled: 0,
      drifted: 0,
    });
    expect(run.producerDone).toBe(false);
    expect(await store.getRun(run.id)).toEqual(run);
    expect(await store.requireRun(run.id)).toEqual(run);
    await store.setColumns(run.id, ['name', 'value']);
    expect((await store.requireRun(run.id)).columns).toEqual(['name', 'value']);
  });

  it('reports a missing run as RUN_NOT_FOUND', async () => {
    expect(await store.getRun('nope')).toBeNull();
    await expect(store.requireRun('nope')).rejects.toSatisfy((e) => isCrmSyncError(e, 'RUN_NOT_FOUND'));
    await expect(store.recordResults('nope', [result(1, 'succeeded')])).rejects.toSatisfy((e) =>
      isCrmSyncError(e, 'RUN_NOT_FOUND'),
    );
    await expect(store.addQueued('nope', 3)).rejects.toSatisfy((e) => isCrmSyncError(e, 'RUN_NOT_FOUND'));
    // The failed calls must not leave a half-made run behind.
    expect(await store.getRun('nope')).toBeNull();
  });

  it('lists newest first with filters and paging', async () => {
    const local = new RunStore({ redis, prefix: `${prefix}:list` });
    const made: string[] = [];
    for (let i = 0; i < 12; i++) {
      const run = await local.createRun({
        workspace: i % 2 === 0 ? 'even' : 'odd',
        operation: 'lead.update',
        source: `f${i}.csv`,
        ...(i % 3 === 0 ? { syncName: 'nightly' } : {}),
      });
      made.push(run.id);
    }
    await local.setStatus(made[0]!, 'failed', 'broken file');
    await local.setStatus(made[6]!, 'failed');
    const newestFirst = [...made].reverse();

    const all = await local.listRuns();
    expect(all.total).toBe(12);
    expect(all.runs.map((r) => r.id)).toEqual(newestFirst);

    const page = await local.listRuns({ offset: 3, limit: 4 });
    expect(page.total).toBe(12);
    expect(page.runs.map((r) => r.id)).toEqual(newestFirst.slice(3, 7));

    const odd = await local.listRuns({ workspace: 'odd' });
    expect(odd.total).toBe(6);
    expect(odd.runs.every((r) => r.workspace === 'odd')).toBe(true);

    const failed = await local.listRuns({ status: 'failed' });
    expect(failed.runs.map((r) => r.id)).toEqual([made[6], made[0]]);
    expect(failed.runs[1]?.reason).toBe('broken file');
    expect(failed.runs[1]?.finishedAt).toBeDefined();

    // One status across workspaces: each workspace's index, merged newest first, paged.
    const running = newestFirst.filter((id) => id !== made[0] && id !== made[6]);
    const runningPage = await local.listRuns({ status: 'running', offset: 2, limit: 5 });
    expect(runningPage.total).toBe(10);
    expect(runningPage.runs.map((r) => r.id)).toEqual(running.slice(2, 7));
    expect(new Set(runningPage.runs.map((r) => r.workspace))).toEqual(new Set(['even', 'odd']));

    const nightlyEvenFailed = await local.listRuns({ syncName: 'nightly', workspace: 'even', status: 'failed' });
    expect(nightlyEvenFailed.total).toBe(2);
    expect(nightlyEvenFailed.runs.map((r) => r.id)).toEqual([made[6], made[0]]);

    const nightlyRunning = await local.listRuns({ syncName: 'nightly', status: 'running', limit: 1 });
    expect(nightlyRunning.total).toBe(2);
    expect(nightlyRunning.runs.map((r) => r.id)).toEqual([made[9]]);

    await local.deleteRun(made[11]!);
    expect(await local.getRun(made[11]!)).toBeNull();
    expect((await local.listRuns()).total).toBe(11);
    expect((await local.listRuns({ status: 'running' })).runs.map((r) => r.id)).not.toContain(made[11]);
  });
});

describe('counts', () => {
  it('counts each row once under duplicate delivery', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 4);
    await store.recordResults(run.id, [result(1, 'succeeded'), result(2, 'failed')]);
    // Redelivered jobs record the same rows again, also twice within one batch.
    await store.recordResults(run.id, [result(1, 'succeeded'), result(2, 'failed'), result(2, 'failed')]);
    const counts = await store.recordResults(run.id, [result(3, 'succeeded')]);
    expect(counts).toEqual({
      total: 4,
      queued: 1,
      succeeded: 2,
      failed: 1,
      skipped: 0,
      invalid: 0,
      superseded: 0,
      uncertain: 0,
      cancelled: 0,
      drifted: 0,
    });
    // A later delivery that ends differently never replaces the stored result: it is refused.
    const late = await store.recordFenced(run.id, [result(2, 'succeeded')]);
    expect(late.refused).toEqual([{ row: 2, reason: 'exists' }]);
    expect(late.counts).toEqual(counts);
    expect((await store.getResult(run.id, 2))?.status).toBe('failed');
    expect((await store.requireRun(run.id)).counts).toEqual(counts);
  });

  it("stores a queued result only for the writer that still holds its job and the row's round", async () => {
    const run = await newRun();
    await store.addQueued(run.id, 3);
    const lockKey = `${prefix}:test-lock:${run.id}`;
    await redis.set(lockKey, 'token-2');
    const fence = (token: string, round = 0) => ({ lockKey, token, round });
    // Attempt 1 lost the lock to attempt 2: its result is refused, attempt 2's is stored.
    const stale = await store.recordFenced(run.id, [result(1, 'failed')], { fences: [fence('token-1')] });
    expect(stale.refused).toEqual([{ row: 1, reason: 'lock' }]);
    const current = await store.recordFenced(run.id, [result(1, 'succeeded')], { fences: [fence('token-2')] });
    expect(current.refused).toEqual([]);
    // Row 2 was retried (round 5): the first round's writer, or the sweep acting for it, is refused.
    await store.recordResults(run.id, [result(2, 'failed')]);
    await store.requeueRows(run.id, [2], 5);
    const oldRound = await store.recordFenced(run.id, [result(2, 'failed')], {
      fences: [{ lockKey: '', token: '', round: 0 }],
    });
    expect(oldRound.refused).toEqual([{ row: 2, reason: 'round' }]);
    const newRound = await store.recordFenced(run.id, [result(2, 'succeeded')], {
      fences: [{ lockKey: '', token: '', round: 5 }],
    });
    expect(newRound.refused).toEqual([]);
    expect(newRound.counts).toMatchObject({ succeeded: 2, failed: 0, queued: 1 });
  });

  it('counts rows resolved at ingest (fromQueue false) into total', async () => {
    const run = await newRun();
    await store.recordResults(run.id, [result(1, 'invalid'), result(2, 'skipped')], { fromQueue: false });
    await store.recordResults(run.id, [result(1, 'invalid')], { fromQueue: false });
    await store.addQueued(run.id, 1);
    const counts = await store.recordResults(run.id, [result(3, 'succeeded')]);
    expect(counts).toEqual({
      total: 3,
      queued: 0,
      succeeded: 1,
      failed: 0,
      skipped: 1,
      invalid: 1,
      superseded: 0,
      uncertain: 0,
      cancelled: 0,
      drifted: 0,
    });
    const invalid = await store.getResult(run.id, 1);
    expect(invalid).toEqual(result(1, 'invalid'));
    // Succeeded/skipped rows do not keep their source values (memory), problem rows do.
    expect((await store.getResult(run.id, 2))?.original).toBeUndefined();
    expect(await store.getResult(run.id, 99)).toBeNull();
  });
});

describe('completion', () => {
  it('completes when results arrive after finishProducing', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 2);
    expect((await store.finishProducing(run.id)).status).toBe('running');
    await store.recordResults(run.id, [result(1, 'succeeded')]);
    expect((await store.requireRun(run.id)).status).toBe('running');
    await store.recordResults(run.id, [result(2, 'failed')]);
    const done = await store.requireRun(run.id);
    expect(done.status).toBe('completed');
    expect(done.finishedAt).toBeDefined();
    expect((await store.listRuns({ status: 'completed' })).runs.map((r) => r.id)).toContain(run.id);
    expect((await store.listRuns({ status: 'running' })).runs.map((r) => r.id)).not.toContain(run.id);
  });

  it('completes at finishProducing when every result is already in', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 2);
    await store.recordResults(run.id, [result(1, 'succeeded'), result(2, 'succeeded')]);
    expect((await store.requireRun(run.id)).status).toBe('running');
    const done = await store.finishProducing(run.id);
    expect(done.status).toBe('completed');
    expect(done.producerDone).toBe(true);
  });

  it('keeps a blocked run blocked until it is set running again', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 1);
    await store.finishProducing(run.id);
    await store.setStatus(run.id, 'blocked', 'the CRM refused the API key');
    await store.recordResults(run.id, [result(1, 'succeeded')]);
    const blocked = await store.requireRun(run.id);
    expect(blocked.status).toBe('blocked');
    expect(blocked.reason).toBe('the CRM refused the API key');
    await store.setStatus(run.id, 'running');
    const running = await store.requireRun(run.id);
    expect(running.reason).toBeUndefined();
    // The next batch (even an empty one) notices everything is done.
    await store.recordResults(run.id, []);
    expect((await store.requireRun(run.id)).status).toBe('completed');
  });
});

describe('problems and iteration', () => {
  const rowCount = 20_000;
  let runId = '';

  beforeAll(async () => {
    runId = (await newRun()).id;
    await store.addQueued(runId, rowCount);
    for (let first = 1; first <= rowCount; first += 1000) {
      const batch: RowResult[] = [];
      for (let row = first; row < first + 1000; row++) {
        if (row % 10 === 0)
          batch.push(result(row, 'failed', row % 20 === 0 ? { message: `Owner ${row} not FOUND` } : {}));
        else if (row % 10 === 5) batch.push(result(row, 'invalid'));
        else batch.push(result(row, 'succeeded'));
      }
      // Record batches in reverse order: the indexes, not arrival order, give row order.
      await store.recordResults(runId, batch.reverse());
    }
  });

  it('pages failed and invalid rows in row order', async () => {
    const first = await store.problems(runId, { limit: 3 });
    expect(first.total).toBe(4000);
    expect(first.rows.map((r) => [r.row, r.status])).toEqual([
      [5, 'invalid'],
      [10, 'failed'],
      [15, 'invalid'],
    ]);
    const later = await store.problems(runId, { offset: 3999, limit: 10 });
    expect(later.rows.map((r) => r.row)).toEqual([20_000]);
    expect(later.rows[0]?.original).toEqual({ id: '20000', name: 'Deal 20000' });
  });

  it('filters problems by message text, case-insensitively', async () => {
    const found = await store.problems(runId, { messageContains: 'not found', offset: 2, limit: 2 });
    expect(found.total).toBe(1000);
    expect(found.rows.map((r) => r.row)).toEqual([60, 80]);
    const byField = await store.problems(runId, { messageContains: 'VALUE: must be', limit: 1 });
    expect(byField.total).toBe(2000);
    expect(byField.rows[0]?.row).toBe(5);
  });

  it('iterates all results or only problems in row order', async () => {
    let expected = 1;
    for await (const r of store.iterateResults(runId, { batchSize: 777 })) {
      expect(r.row).toBe(expected++);
    }
    expect(expected).toBe(rowCount + 1);
    const problemRows: number[] = [];
    for await (const r of store.iterateResults(runId, { problemsOnly: true, batchSize: 333 })) problemRows.push(r.row);
    expect(problemRows).toHaveLength(4000);
    expect(problemRows.every((row, i) => i === 0 || row > problemRows[i - 1]!)).toBe(true);
    expect(problemRows.every((row) => row % 5 === 0)).toBe(true);
  });
});

describe('requeue', () => {
  it('moves failed rows back to queued, returns originals, and completes again', async () => {
    const run = await newRun();
    await store.addQueued(run.id, 3);
    await store.recordResults(run.id, [result(1, 'succeeded'), result(2, 'failed'), result(3, 'failed')]);
    await store.recordResults(run.id, [result(4, 'invalid')], { fromQueue: false });
    expect((await store.finishProducing(run.id)).status).toBe('completed');

    const some = await store.requeueRows(run.id, [1, 3, 42], 1);
    expect(some).toEqual([{ row: 3, line: 4, original: { id: '3', name: 'Deal 3' }, previous: 'failed' }]);
    let current = await store.requireRun(run.id);
    expect(current.status).toBe('running');
    expect(current.finishedAt).toBeUndefined();
    expect(current.counts).toEqual({
      total: 4,
      queued: 1,
      succeeded: 1,
      failed: 1,
      skipped: 0,
      invalid: 1,
      superseded: 0,
      uncertain: 0,
      cancelled: 0,
      drifted: 0,
    });
    expect(await store.getResult(run.id, 3)).toBeNull();

    const rest = await store.requeueRows(run.id, undefined, 2);
    expect(rest.map((r) => r.row)).toEqual([2, 4]);
    current = await store.requireRun(run.id);
    expect(current.counts).toEqual({
      total: 4,
      queued: 3,
      succeeded: 1,
      failed: 0,
      skipped: 0,
      invalid: 0,
      superseded: 0,
      uncertain: 0,
      cancelled: 0,
      drifted: 0,
    });
    expect(current.producerDone).toBe(true);
    expect((await store.problems(run.id)).total).toBe(0);
    expect(await store.requeueRows(run.id, undefined, 3)).toEqual([]);

    await store.recordResults(run.id, [result(2, 'succeeded'), result(3, 'succeeded')]);
    expect((await store.requireRun(run.id)).status).toBe('running');
    const counts = await store.recordResults(run.id, [result(4, 'failed')]);
    expect(counts).toEqual({
      total: 4,
      queued: 0,
      succeeded: 3,
      failed: 1,
      skipped: 0,
      invalid: 0,
      superseded: 0,
      uncertain: 0,
      cancelled: 0,
      drifted: 0,
    });
    expect((await store.requireRun(run.id)).status).toBe('completed');
  });
});

describe('deleteRun', () => {
  it('removes the run, every result bucket and its index entries', async () => {
    const run = await newRun('deleted');
    const rows = Array.from({ length: 450 }, (_, i) => result(i + 1, i % 7 === 0 ? 'failed' : 'succeeded'));
    await store.recordResults(run.id, rows, { fromQueue: false });
    expect(await redis.keys(`${prefix}:run:*:${run.id}*`)).toHaveLength(1 + 5 + 1);
    await store.deleteRun(run.id);
    expect(await redis.keys(`${prefix}:run:*:${run.id}*`)).toEqual([]);
    expect((await store.listRuns({ workspace: 'deleted' })).total).toBe(0);
    expect((await store.listRuns({ status: 'running' })).runs.map((r) => r.id)).not.toContain(run.id);
    await expect(store.recordResults(run.id, [result(1, 'succeeded')])).rejects.toMatchObject({
      code: 'RUN_NOT_FOUND',
    });
    await store.deleteRun(run.id);
  });

  it('a run whose creation stopped after the fleet-wide indexes (no record yet) is left out of listings and still removed', async () => {
    // createRun writes <p>:runs, the run → workspace hash and the workspace set first, then the
    // record and its workspace indexes in one MULTI: a process killed between the two leaves this.
    const local = new RunStore({ redis, prefix: `${prefix}:half` });
    const keys = new RunKeys(`${prefix}:half`);
    const id = '20261120-000000-000-000halfw';
    await redis.hset(keys.runWorkspaces(), id, 'acme');
    await redis.zadd(keys.allRuns(), Date.parse('2026-11-20T00:00:00Z'), id);
    await redis.sadd(keys.workspacesWithRuns(), 'acme');
    expect((await local.listRuns()).runs).toEqual([]);
    expect((await local.listRuns({ status: 'running' })).runs).toEqual([]);
    expect(await local.getRun(id)).toBeNull();
    expect(await local.runIdsCreatedBefore(Date.now(), 10)).toEqual([id]); // retention finds it
    await local.deleteRun(id);
    expect(await redis.zscore(keys.allRuns(), id)).toBeNull();
    expect(await redis.hget(keys.runWorkspaces(), id)).toBeNull();
  });
});

describe('durability', () => {
  it('reads the same run and results through a new connection and store', async () => {
    const run = await newRun('durable');
    await store.addQueued(run.id, 2);
    await store.recordResults(run.id, [result(1, 'failed'), result(2, 'succeeded')]);
    const other = new Redis(TEST_REDIS_URL);
    try {
      const again = new RunStore({ redis: other, prefix });
      expect(await again.requireRun(run.id)).toEqual(await store.requireRun(run.id));
      expect(await again.getResult(run.id, 1)).toEqual(result(1, 'failed'));
      await again.finishProducing(run.id);
      expect((await again.requireRun(run.id)).status).toBe('completed');
    } finally {
      await other.quit();
    }
  });

  it('loads a script the server does not know yet (EVALSHA falls back to EVAL)', async () => {
    const token = randomBytes(8).toString('hex');
    const script = new LuaScript(`return ARGV[1] .. '${token}'`);
    expect(await script.run(redis, [], ['x-'])).toBe(`x-${token}`);
    expect(await redis.script('EXISTS', script.sha)).toEqual([1]);
  });
});
