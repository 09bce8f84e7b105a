import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunKeys } from '../../src/keys/index.js';
import { cancelRun } from '../../src/lifecycle/index.js';
import type { RunRecord } from '../../src/runs/index.js';
import {
  csv,
  resultsByRow,
  startHarness,
  type Harness,
  calibrateRecordClock,
  FAULTED_POST_LATENCY,
} from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';
import { POST_DEALS, dealsNamed, verify } from './create-fixtures.js';

/*
 * Issue 42, item 4: the evidence that a row's create may have reached the CRM lives with the
 * row's result, not only in the run's create markers (a key with a TTL of its own, which can
 * expire while the run is still retryable). Here the markers are deleted by hand — once while
 * the creates wait out their settle time after a `runs cancel`, and again before `runs retry` —
 * and no create is sent a second time. The calm path: a retry of creates the CRM refused (never
 * applied) creates each exactly once, and looks for nothing first.
 */

const LIST_DEALS = { method: 'GET', path: /\/v2\/deals$/ };

describe('creates whose answers were lost, cancelled in their settle wait, their markers gone', () => {
  let h: Harness;
  const cli = cliFor(() => h);
  beforeAll(async () => {
    // A settle time long enough that the cancel and the markers' loss land while every create
    // still waits, however loaded the machine (checked below).
    h = await startHarness({ records: 2, seed: 42, crmProxy: true, createSettleMs: 5000, requestTimeoutMs: 1500 });
    await h.startWorkers({ concurrency: 8, sweepIntervalMs: 300 });
    await calibrateRecordClock(h);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('runs retry sends none of them again: each row is on its own deal or uncertain, 0 duplicates', async () => {
    const markers = (run: RunRecord) => new RunKeys(h.config.prefix).creating(run);
    h.proxy!.setRules([{ ...POST_DEALS, applyAndDrop: true, times: 20, ...FAULTED_POST_LATENCY }]);
    const rows = Array.from({ length: 20 }, (_, i) => [`Expired M ${i}`, 300 + i]);
    const started = await h.importFile(h.file('expired.csv', csv(['name', 'value'], rows)), 'deal.create');
    for (let i = 0; i < 1000 && h.proxy!.unspent() > 0; i++) await sleep(10);
    expect(h.proxy!.unspent()).toBe(0); // all 20 applied, all answers lost
    // A person makes 3 of the same deals meanwhile: those rows cannot tell theirs (uncertain).
    const persons = Array.from({ length: 3 }, (_, i) => h.ws.createDeal({ name: `Expired M ${i}`, value: 300 + i }).id);
    // The markers expire while the creates still wait (stood in for by deleting the key): all 20
    // are there, and no row has its result yet.
    expect(await h.runtime.redis.hlen(markers(started))).toBe(20);
    expect(await resultsByRow(h, started.id)).toEqual([]);
    await h.runtime.redis.del(markers(started));
    // `runs cancel` (its library call: a CLI's start can take seconds on a loaded machine): the
    // creates waiting in the queue are in doubt, their jobs left to look.
    const cancelled = await cancelRun({
      store: h.runtime.store,
      queueFor: (w) => h.runtime.queue(w),
      runId: started.id,
    });
    expect(cancelled.inDoubt).toBeGreaterThan(0);
    expect(cancelled.removed).toBe(0);
    // And gone again after the cancel (the rows put back what they begin with).
    await h.runtime.redis.del(markers(started));
    const run = await h.waitForRun(started.id, 60_000, (r) => r.counts.queued === 0);
    const first = await resultsByRow(h, run.id);
    expect(first).toHaveLength(20);
    // None is "not sent": each finished its look-up from the evidence its result bucket keeps.
    expect(first.filter((r) => r.status !== 'succeeded' && r.status !== 'uncertain')).toEqual([]);

    // And again before the retry (an uncertain row's marker, kept for its next look, expires too).
    await h.runtime.redis.del(markers(run));
    const posts = h.proxy!.count('POST', POST_DEALS.path);
    const retried = await cli(['runs', 'retry', run.id]);
    expect(retried.code).toBe(0);
    const again = await h.waitForRun(run.id, 60_000, (r) => r.counts.queued === 0 && r.status !== 'running');
    expect(h.proxy!.count('POST', POST_DEALS.path) - posts).toBe(0);

    const deals = dealsNamed(h, 'Expired M').filter((d) => !persons.includes(d.id));
    expect(deals).toHaveLength(20); // one deal per row: nothing was created twice
    const results = await resultsByRow(h, again.id);
    expect(results).toHaveLength(20);
    for (const r of results) {
      const own = deals.find((d) => d.name === `Expired M ${r.row - 1}`)!;
      if (r.row > 3) expect(r).toMatchObject({ status: 'succeeded', recordId: own.id });
      else expect(r).toMatchObject({ status: 'uncertain', message: expect.stringContaining(own.id) });
    }
    expect(again.counts).toMatchObject({ succeeded: 17, uncertain: 3, failed: 0, cancelled: 0 });
    expect(await verify(h, run.id)).toMatchObject({ suspectedDuplicates: 0 });
  }, 150_000);
});

describe('a retry of creates the CRM refused (never applied)', () => {
  let h: Harness;
  const cli = cliFor(() => h);
  beforeAll(async () => {
    h = await startHarness({ records: 2, seed: 43, crmProxy: true, createSettleMs: 300 });
    await h.startWorkers({ concurrency: 4 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('creates each exactly once, without a look-up first; a plain create run makes one deal a row', async () => {
    // A run of its own first: every row answered, one deal each, no list read.
    const calm = await h.waitForRun(
      (
        await h.importFile(
          h.file(
            'calm.csv',
            csv(
              ['name', 'value'],
              [0, 1, 2, 3].map((i) => [`Calm C ${i}`, 10 + i]),
            ),
          ),
          'deal.create',
        )
      ).id,
      20_000,
    );
    expect(calm.counts).toMatchObject({ total: 4, succeeded: 4 });
    expect(dealsNamed(h, 'Calm C')).toHaveLength(4);

    // The CRM refuses 5 creates (a body it cannot take: 4xx, proven not applied).
    h.proxy!.setRules([{ ...POST_DEALS, rewriteBody: () => ({}), times: 5 }]);
    const rows = Array.from({ length: 5 }, (_, i) => [`Refused R ${i}`, 20 + i]);
    const run = await h.waitForRun(
      (await h.importFile(h.file('refused.csv', csv(['name', 'value'], rows)), 'deal.create')).id,
      20_000,
    );
    expect(run.counts).toMatchObject({ total: 5, failed: 5 });
    expect(dealsNamed(h, 'Refused R')).toHaveLength(0);
    h.proxy!.setRules([]);

    const posts = h.proxy!.count('POST', POST_DEALS.path);
    const lists = h.proxy!.count(LIST_DEALS.method, LIST_DEALS.path);
    const retried = await cli(['runs', 'retry', run.id]);
    expect(retried.code).toBe(0);
    const again = await h.waitForRun(run.id, 30_000, (r) => r.counts.queued === 0 && r.status !== 'running');
    expect(again.counts).toMatchObject({ total: 5, succeeded: 5, failed: 0, uncertain: 0 });
    expect(h.proxy!.count('POST', POST_DEALS.path) - posts).toBe(5);
    // Nothing was in doubt: no row looked for a deal before it sent.
    expect(h.proxy!.count(LIST_DEALS.method, LIST_DEALS.path) - lists).toBe(0);
    const deals = dealsNamed(h, 'Refused R');
    expect(deals).toHaveLength(5);
    for (const r of await resultsByRow(h, run.id))
      expect(r.recordId).toBe(deals.find((d) => d.name === `Refused R ${r.row - 1}`)!.id);
  }, 60_000);
});
