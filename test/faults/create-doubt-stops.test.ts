import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunKeys } from '../../src/keys/index.js';
import { produceRun, retryRun } from '../../src/lifecycle/index.js';
import { writeResultsCsv, type RunRecord } from '../../src/runs/index.js';
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
 * Creates whose answer was lost, stopped or looked at later (issue 30): creates whose look-up
 * cannot be done end uncertain, never failed; a retry stopped before it queued a create whose
 * marker is set records it uncertain; a cancel in the settle wait never says "not sent" of a
 * create that may have made its deal, and its export cannot be imported into a duplicate; verify
 * tells this run's duplicates from other runs' deals and deals made before it. The rest:
 * create-doubt.test.ts (split so that vitest runs the two side by side).
 */

const ANY_DEAL_POST = POST_DEALS.path;

describe('creates whose look-up cannot be done before their attempts run out', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      records: 2,
      seed: 28,
      crmProxy: true,
      createSettleMs: 300,
      requestTimeoutMs: 1500,
      retry: { attempts: 2, backoffMs: 100 },
    });
    await h.startWorkers({ concurrency: 4, sweepIntervalMs: 300 });
    await calibrateRecordClock(h);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('end uncertain, never failed: their export is refused, and with their markers gone runs retry sends nothing', async () => {
    // Every create is applied and its answer lost; every list read (the look-up) answers 502.
    h.proxy!.setRules([
      { ...POST_DEALS, applyAndDrop: true, times: 5, ...FAULTED_POST_LATENCY },
      { method: 'GET', path: /\/v2\/deals$/, fail502: true },
    ]);
    const rows = Array.from({ length: 5 }, (_, i) => [`Unlooked L ${i}`, 70 + i]);
    let run: RunRecord;
    try {
      run = await h.waitForRun(
        (await h.importFile(h.file('unlooked.csv', csv(['name', 'value'], rows)), 'deal.create')).id,
        // Each row's look-up is a pass of its own that fails (2 s apart): slow on purpose.
        90_000,
      );
    } finally {
      h.proxy!.setRules([]);
    }
    expect(dealsNamed(h, 'Unlooked L')).toHaveLength(5); // every create was applied
    const results = await resultsByRow(h, run.id);
    expect(results).toHaveLength(5);
    for (const r of results) {
      // Its deal may exist: never `failed` (an operator would send it again), but uncertain, naming why.
      expect(r).toMatchObject({ status: 'uncertain', code: 'CREATE_UNCERTAIN' });
      expect(r.message).toMatch(/look-up .*could not be done.*502.*runs retry/);
    }
    expect(run.counts).toMatchObject({ total: 5, uncertain: 5, failed: 0 });
    const posts = h.proxy!.count('POST', ANY_DEAL_POST);

    // The failed-rows export imported again as it is: refused, no second deal.
    const path = h.file('unlooked-failed.csv', '');
    const out = createWriteStream(path);
    await writeResultsCsv(h.runtime.store, run.id, out, { problemsOnly: true });
    out.end();
    await finished(out);
    const reimported = await h.waitForRun(
      (await h.importFile(path, 'deal.create', { ignoreUnknownColumns: true })).id,
      20_000,
    );
    expect(reimported.counts).toMatchObject({ total: 5, invalid: 5, succeeded: 0 });
    expect(h.proxy!.count('POST', ANY_DEAL_POST) - posts).toBe(0);
    expect(dealsNamed(h, 'Unlooked L')).toHaveLength(5);

    // The markers expire (stood in for by removing them): runs retry looks before it sends, from
    // the send evidence beside each row's result, and now that the list can be read each row
    // finds its own deal.
    await h.runtime.redis.del(new RunKeys(h.config.prefix).creating(run));
    await retryRun({ runId: run.id, queue: h.runtime.queue('acme'), store: h.runtime.store });
    const again = await h.waitForRun(run.id, 20_000, (r) => r.counts.queued === 0 && r.status !== 'running');
    expect(again.counts).toMatchObject({ succeeded: 5, uncertain: 0, failed: 0 });
    expect(h.proxy!.count('POST', ANY_DEAL_POST) - posts).toBe(0);
    const deals = dealsNamed(h, 'Unlooked L');
    expect(deals).toHaveLength(5);
    for (const r of await resultsByRow(h, run.id))
      expect(r.recordId).toBe(deals.find((d) => d.name === `Unlooked L ${r.row - 1}`)!.id);
  }, 150_000);
});

describe('a retry stopped before it queued a create whose marker is set', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ records: 2, seed: 29, createSettleMs: 300 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('records it uncertain, never cancelled "not sent"; a row without a marker is cancelled', async () => {
    // No worker: the run's rows stay queued, as a retry's rows are once requeued.
    await h.runtime.queue('acme').pause();
    const file = h.file(
      'stopped-retry.csv',
      csv(
        ['name', 'value'],
        [
          ['Stopped R 0', 80],
          ['Stopped R 1', 81],
        ],
      ),
    );
    const run = await h.importFile(file, 'deal.create');
    await h.runtime.queue('acme').obliterate({ force: true });
    // Row 1's create was sent in an earlier round: its marker is set (its deal may exist).
    await h.runtime.redis.hset(new RunKeys(h.config.prefix).creating(run), '1', `${Date.now()}|${Date.now()}|1||`);
    const rows = [0, 1].map((i) => ({
      row: i + 1,
      line: i + 2,
      original: { name: `Stopped R ${i}`, value: String(80 + i) },
      payload: { op: 'deal.create' as const, fields: { name: `Stopped R ${i}`, value: 80 + i } },
    }));
    async function* source() {
      yield* rows;
    }
    // The run is cancelled while the retry is being produced: nothing more is queued.
    await produceRun(source(), {
      queue: h.runtime.queue('acme'),
      store: h.runtime.store,
      runId: run.id,
      requeued: true,
      generation: Date.now(),
      signal: AbortSignal.abort({ kind: 'cancelled', reason: 'cancelled by a test' }),
    });
    const results = await resultsByRow(h, run.id);
    expect(results.find((r) => r.row === 1)).toMatchObject({ status: 'uncertain', code: 'CREATE_UNCERTAIN' });
    expect(results.find((r) => r.row === 1)!.message).toMatch(/runs retry/);
    expect(results.find((r) => r.row === 2)).toMatchObject({ status: 'cancelled' });
  });
});

describe('a cancel while creates wait out their settle time', () => {
  let h: Harness;
  const cli = cliFor(() => h);
  beforeAll(async () => {
    // A settle time longer than a loaded machine takes to start the `runs cancel` CLI: the
    // cancel must land while the creates still wait (2.5 s was not, once, in the full suite).
    h = await startHarness({ records: 2, seed: 25, crmProxy: true, createSettleMs: 8000, requestTimeoutMs: 1500 });
    await h.startWorkers({ concurrency: 8, sweepIntervalMs: 300 });
    await calibrateRecordClock(h);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('never records a create that may have made its deal "not sent"; the export imported again makes no duplicate', async () => {
    h.proxy!.setRules([{ ...POST_DEALS, applyAndDrop: true, times: 20, ...FAULTED_POST_LATENCY }]);
    const rows = Array.from({ length: 20 }, (_, i) => [`Settling Y ${i}`, 40 + i]);
    const started = await h.importFile(h.file('settling.csv', csv(['name', 'value'], rows)), 'deal.create');
    for (let i = 0; i < 1000 && h.proxy!.unspent() > 0; i++) await sleep(10);
    expect(h.proxy!.unspent()).toBe(0); // all 20 applied, all answers lost: each waits out its settle time
    // A person makes 5 of the same deals meanwhile: those rows will not be able to tell theirs.
    const persons = Array.from({ length: 5 }, (_, i) => h.ws.createDeal({ name: `Settling Y ${i}`, value: 40 + i }).id);
    // `runs cancel`, as an operator runs it: the creates in doubt are said, never "not sent".
    const cancelled = await cli(['runs', 'cancel', started.id]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(/removed from the queue: 0 waiting rows/);
    expect(cancelled.stdout).toMatch(
      /creates in doubt: \d+ \(their answer was lost: they may have made their deal\); never recorded "not sent"/,
    );
    expect(cancelled.stdout).toMatch(/runs retry/);
    const run = await h.waitForRun(started.id, 20_000, (r) => r.counts.queued === 0);
    const results = await resultsByRow(h, run.id);
    const deals = dealsNamed(h, 'Settling Y').filter((d) => !persons.includes(d.id));
    expect(deals).toHaveLength(20);
    // Each finished its look-up: recorded with its deal, or uncertain naming it, never cancelled.
    expect(results.filter((r) => r.status === 'cancelled')).toHaveLength(0);
    for (const r of results) {
      const own = deals.find((d) => d.name === `Settling Y ${r.row - 1}`)!;
      if (r.row > 5) expect(r).toMatchObject({ status: 'succeeded', recordId: own.id });
      else expect(r).toMatchObject({ status: 'uncertain', message: expect.stringContaining(own.id) });
    }
    expect((await h.runtime.store.requireRun(run.id)).status).toBe('cancelled');

    // The failed-rows export, imported again as it is: no row in doubt can make a second deal.
    const path = h.file('settling-failed.csv', '');
    const out = createWriteStream(path);
    await writeResultsCsv(h.runtime.store, run.id, out, { problemsOnly: true });
    out.end();
    await finished(out);
    const again = await h.waitForRun(
      (await h.importFile(path, 'deal.create', { ignoreUnknownColumns: true })).id,
      20_000,
    );
    expect(again.counts).toMatchObject({ total: 5, invalid: 5, succeeded: 0 });
    const [refused] = await resultsByRow(h, again.id);
    expect(refused!.errors?.[0]?.message).toMatch(/may already have made its deal.*runs retry/);
    expect(dealsNamed(h, 'Settling Y')).toHaveLength(25);
  }, 60_000);
});

describe('verify of a file imported twice', () => {
  let h: Harness;
  const cli = cliFor(() => h);
  beforeAll(async () => {
    h = await startHarness({ records: 2, seed: 27, createSettleMs: 300 });
    await h.startWorkers({ concurrency: 4 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("two correct runs exit 0: each counts the other's deals as theirs, and a person's earlier deal as made before", async () => {
    const theirs = h.ws.createDeal({ name: 'Twice V 0', value: 60 });
    theirs.created_at = new Date(Date.now() - 3_600_000).toISOString();
    const file = h.file(
      'twice-v.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: 10 }, (_, i) => [`Twice V ${i % 5}`, 60]),
      ),
    );
    const first = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 20_000);
    const second = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 20_000);
    for (const run of [first, second]) {
      const report = await verify(h, run.id);
      expect(report).toMatchObject({ checked: 10, suspectedDuplicates: 0, recordedBeforeSend: 0, otherRunsDeals: 10 });
      expect(report.preexistingLookAlikes).toBe(1);
      const verified = await cli(['verify', run.id]);
      expect(verified.code).toBe(0);
      expect(verified.stdout).toMatch(/10 identical deals recorded by other runs/);
    }
    // A person's identical deal made a while after both runs ended (after any of their requests
    // could have landed: a write lease, 30 s) is neither run's doing: exit 0.
    const later = h.ws.createDeal({ name: 'Twice V 1', value: 60 });
    later.created_at = new Date(Date.parse(second.finishedAt!) + 60_000).toISOString();
    for (const run of [first, second]) {
      const report = await verify(h, run.id);
      expect(report).toMatchObject({ suspectedDuplicates: 0, madeAfterRun: 1 });
      const verified = await cli(['verify', run.id]);
      expect(verified.code).toBe(0);
      expect(verified.stdout).toMatch(/1 identical deals made after the run ended/);
    }
    // A deal made during the run that no row recorded is this run's suspected duplicate: exit 1.
    const during = h.ws.createDeal({ name: 'Twice V 2', value: 60 });
    const mid = (Date.parse(second.createdAt) + Date.parse(second.finishedAt!)) / 2;
    during.created_at = new Date(mid).toISOString();
    const report = await verify(h, second.id);
    expect(report.suspectedDuplicates).toBe(1);
    expect((await cli(['verify', second.id])).code).toBe(1);
  }, 60_000);
});
