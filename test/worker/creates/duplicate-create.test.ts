import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../../src/config/index.js';
import { silentLogger } from '../../../src/log/index.js';
import type { CrmClient } from '../../../src/crm/index.js';
import { DealLookup, type DealLookupOptions, type LookupAnswer } from '../../../src/worker/creates/index.js';
import { LookupPassBoard } from '../../../src/runs/index.js';
import { createCrmClient } from '../../../src/runtime/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../../helpers/pipeline.js';

describe('duplicate-safe deal creates', () => {
  let h: Harness;
  const workerLines: string[] = [];
  beforeAll(async () => {
    // Short backoff: the test is about what a retry does, not how long it waits. A settle time of
    // 3 s, not the harness's 200 ms: the simulator runs in this process, and on a loaded machine
    // its event loop can take in a POST whose job lost its lock (and aborted it) seconds after
    // the send — the late delivery no client can close (docs/guarantees.md), which would make a duplicate
    // this test is not about. (A dropped answer is causal: its lookup waits for a pass begun
    // after the loss was seen — see test/faults/creates.test.ts.)
    h = await startHarness({ records: 5, seed: 3, retry: { attempts: 12, backoffMs: 5 }, createSettleMs: 3000 });
    // The workers' create lines (info and up), kept so a failure can show what each duplicated row went through.
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          workerLines.push(chunk.toString('utf8').trim());
          done();
        },
      }),
    );
    await h.startWorkers({ concurrency: 16, logger });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('1,000 creates at 20% commit-then-drop end with exactly 1,000 new deals', async () => {
    const before = h.ws.deals.size;
    const rows = Array.from({ length: 1000 }, (_, i) => [
      `Dup-safe deal ${i + 1}`,
      100 + i,
      i % 2 ? 'won' : 'in_progress',
    ]);
    const file = h.file('creates.csv', csv(['name', 'value', 'status'], rows));
    h.ws.setFaults({ commitThenDropRate: 0.2 });
    let done;
    try {
      done = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 45_000);
    } finally {
      h.ws.setFaults(null);
    }

    expect(h.ws.stats.drops).toBeGreaterThan(100); // the fault really fired
    // A lost answer whose deal was stamped within the record clock's uncertainty of its send
    // (here the simulator answers in a millisecond or two) cannot be told from a person's made
    // just before: that row ends uncertain, naming its deal, and is never sent again.
    const results = await resultsByRow(h, done.id);
    const inDoubt = results.filter((r) => r.status === 'uncertain');
    console.log(`[creates] 1,000 at 20% commit-then-drop: ${h.ws.stats.drops} drops, ${inDoubt.length} rows uncertain`);
    expect(done.counts).toMatchObject({ total: 1000, succeeded: 1000 - inDoubt.length, failed: 0 });
    expect(inDoubt.length).toBeLessThan(h.ws.stats.drops);
    // On a failure, what a reader needs to find the cause: each duplicated name's deals (id and
    // when the CRM stamped them) and what its row recorded.
    if (h.ws.deals.size !== before + 1000) {
      const byName = new Map<string, Array<{ id: string; created_at: string }>>();
      for (const d of h.ws.deals.values()) byName.set(d.name, [...(byName.get(d.name) ?? []), d]);
      for (const [name, deals] of byName) {
        if (deals.length < 2) continue;
        const r = results.find((x) => x.row === Number(name.replace('Dup-safe deal ', '')));
        console.log(
          `[creates] duplicated ${name}: ${JSON.stringify(deals.map((d) => [d.id, d.created_at]))}; row ${r?.status} ${r?.recordId ?? ''} ${r?.message ?? ''}`,
        );
        const row = `"row":${r?.row ?? -1},`;
        for (const line of workerLines.filter((l) => l.includes(row) && l.includes(done.id))) console.log(`  ${line}`);
      }
    }
    expect(h.ws.deals.size).toBe(before + 1000);
    const names = new Set([...h.ws.deals.values()].map((d) => d.name));
    expect(names.size).toBe(h.ws.deals.size);
    // Every succeeded row recorded a distinct deal, the one with the row's name; an uncertain row names its own.
    const ids = results.filter((r) => r.status === 'succeeded').map((r) => r.recordId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const r of results) {
      if (r.status === 'succeeded') expect(h.ws.deals.get(r.recordId!)?.name).toBe(`Dup-safe deal ${r.row}`);
      else {
        const own = [...h.ws.deals.values()].find((d) => d.name === `Dup-safe deal ${r.row}`)!;
        expect(r.message).toContain(own.id);
      }
    }
  }, 60_000);

  it('a create requeued after a 429 does not page the deal list (only a possibly committed attempt does)', async () => {
    const before = h.ws.deals.size;
    h.ws.resetStats();
    h.ws.setRateLimit({ max: 2, windowMs: 200 });
    const file = h.file(
      'limited.csv',
      csv(
        ['name', 'value'],
        Array.from({ length: 30 }, (_, i) => [`Limited deal ${i + 1}`, i]),
      ),
    );
    let run;
    try {
      run = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 40_000);
    } finally {
      h.ws.setRateLimit(null);
    }
    expect(h.ws.stats.rateLimited).toBeGreaterThan(0);
    expect(run.counts).toMatchObject({ total: 30, succeeded: 30 });
    expect(h.ws.stats.listPages).toBe(0);
    expect(h.ws.deals.size).toBe(before + 30);
  }, 45_000);

  /** A lookup as a worker process builds it; `ws` names a board of its own unless two share it. */
  function lookupFor(client: CrmClient, ws: string, more: Partial<DealLookupOptions> = {}): DealLookup {
    const board = new LookupPassBoard({ redis: h.runtime.redis, prefix: h.config.prefix, workspace: ws });
    return new DealLookup({
      client,
      board,
      fence: { claimed: async () => new Set(), recordClock },
      pageSize: DEFAULTS.client.pageSize,
      minGapMs: 0,
      ...more,
    });
  }
  /** The simulator stamps with this machine's clock, which is also Redis' here: offset 0, 1 ms wide. */
  const recordClock = async () => ({ lo: 0, hi: 1, resolutionMs: 1, ageMs: 0 });
  /** A marker whose send was a little before now (the deals below are made after it). */
  const markerAt = (sentAt = Date.now() - 10) => ({ sentAt, crmClockAt: sentAt, measured: true, exact: true });
  const found = (answer: LookupAnswer) => {
    if (answer.kind !== 'found') throw new Error(`expected an answer, got a wait of ${answer.ms} ms`);
    return answer.ids;
  };
  /** Asks as a worker's job does: a wait is a delay, then the job asks again. */
  async function findEventually(ask: () => Promise<LookupAnswer>): Promise<string[]> {
    for (;;) {
      const answer = await ask();
      if (answer.kind === 'found') return answer.ids;
      await new Promise((r) => setTimeout(r, answer.ms));
    }
  }

  it('a lookup finds a deal by normalised name and value, created after the row was sent, unless claimed; a finished pass answers creates settled before it began', async () => {
    const client = createCrmClient(h.config, 'acme', silentLogger);
    const claimed = new Set<string>();
    const lookup = lookupFor(client, 'lookup-match', {
      fence: { claimed: async (ids) => new Set(ids.filter((id) => claimed.has(id))), recordClock },
      automationFields: ['status'],
    });
    const strict = lookupFor(client, 'lookup-match');
    try {
      const marker = markerAt();
      // A CRM that collapses double spaces and whose automation set another status.
      const made = h.ws.createDeal({ name: 'Possibly  created'.replace('  ', ' '), value: 5, status: 'won' });
      const fields = { name: 'possibly  Created', value: 5, status: 'in_progress' as const };
      expect(found(await lookup.find(fields, marker, 0))).toEqual([made.id]);
      expect(found(await lookup.find({ ...fields, value: 6 }, marker, 0))).toEqual([]);
      // Without status among the workspace's automation fields, the status it sent differs: not its deal.
      expect(await strict.find(fields, marker, 0)).toMatchObject({ ids: [], doubtful: [] });
      // Created before this row's send: a person's deal, not ours (not even in doubt).
      expect(await lookup.find(fields, markerAt(Date.now() + 3_600_000), 0)).toMatchObject({ ids: [], doubtful: [] });
      // Within the clock's uncertainty of the send: in doubt, never taken as its own.
      expect(await lookup.find(fields, markerAt(made.created_at ? Date.parse(made.created_at) : 0), 0)).toMatchObject({
        ids: [],
        doubtful: [made.id],
      });
      claimed.add(made.id);
      expect(found(await lookup.find(fields, marker, 0))).toEqual([]);
      // Every one of these creates had settled before the first pass began: that pass answers all.
      expect(lookup.stats.passes).toBe(1);
      // A create that settles after that pass began needs a pass of its own: its deal may be newer.
      await new Promise((r) => setTimeout(r, 10));
      const late = h.ws.createDeal({ name: 'Settled late', value: 9 });
      const settledAt = Date.now();
      // Passes are spaced by four times their duration at least: this may first be a wait.
      expect(await findEventually(() => lookup.find({ name: 'Settled late', value: 9 }, marker, settledAt))).toEqual([
        late.id,
      ]);
      expect(lookup.stats.passes).toBe(2);
    } finally {
      client.close();
    }
  });

  it('lookups asked for together share one pass over the deal list', async () => {
    const client = createCrmClient(h.config, 'acme', silentLogger);
    const lookup = lookupFor(client, 'lookup-together');
    try {
      const marker = markerAt();
      const names = Array.from({ length: 20 }, (_, i) => `Shared pass ${i}`);
      for (const name of names) h.ws.createDeal({ name, value: 1 });
      const answers = await Promise.all(names.map((name) => lookup.find({ name, value: 1 }, marker, Date.now())));
      expect(answers.every((a) => found(a).length === 1)).toBe(true);
      // Asked in the same tick: all twenty wait on one pass.
      expect(lookup.stats.passes).toBe(1);
    } finally {
      client.close();
    }
  });

  it('processes of a workspace share passes through Redis: one runs it, the other reads its snapshot; the next waits out the gap', async () => {
    const clients = [createCrmClient(h.config, 'acme', silentLogger), createCrmClient(h.config, 'acme', silentLogger)];
    const [a, b] = clients.map((c) => lookupFor(c, 'lookup-shared', { minGapMs: 4000 })) as [DealLookup, DealLookup];
    try {
      const marker = markerAt();
      const first = h.ws.createDeal({ name: 'Shared across processes', value: 3 });
      const pagesBefore = h.ws.stats.listPages;
      expect(found(await a.find({ name: 'Shared across processes', value: 3 }, marker, Date.now()))).toEqual([
        first.id,
      ]);
      const pagesOfOnePass = h.ws.stats.listPages - pagesBefore;
      // Settled before a's pass began: b answers from the shared snapshot without paging.
      expect(found(await b.find({ name: 'Shared across processes', value: 3 }, marker, marker.sentAt))).toEqual([
        first.id,
      ]);
      expect(b.stats).toMatchObject({ passes: 0, sharedLoads: 1 });
      expect(h.ws.stats.listPages - pagesBefore).toBe(pagesOfOnePass);

      // Settled after it: no process may start the next pass before the gap is over.
      const second = h.ws.createDeal({ name: 'Needs the next pass', value: 4 });
      const settledAt = Date.now();
      const waited = await b.find({ name: 'Needs the next pass', value: 4 }, marker, settledAt);
      expect(waited.kind).toBe('wait');
      if (waited.kind === 'wait') {
        expect(waited.ms).toBeGreaterThan(0);
        expect(waited.ms).toBeLessThanOrEqual(4000);
        await new Promise((r) => setTimeout(r, waited.ms + 20));
      }
      expect(found(await b.find({ name: 'Needs the next pass', value: 4 }, marker, settledAt))).toEqual([second.id]);
      expect(a.stats.passes + b.stats.passes).toBe(2);
    } finally {
      for (const c of clients) c.close();
    }
  });

  it('a process killed mid-pass frees it when its lease runs out: another process runs the pass', async () => {
    const client = createCrmClient(h.config, 'acme', silentLogger);
    const board = new LookupPassBoard({
      redis: h.runtime.redis,
      prefix: h.config.prefix,
      workspace: 'lookup-lease',
      leaseMs: 300,
    });
    // The "killed" process: granted the pass, never finishes it.
    expect((await board.ask(0, 'dead-process')).kind).toBe('run');
    const lookup = new DealLookup({
      client,
      board,
      fence: { claimed: async () => new Set(), recordClock },
      pageSize: DEFAULTS.client.pageSize,
      minGapMs: 0,
    });
    try {
      const deal = h.ws.createDeal({ name: 'After a dead pass', value: 8 });
      const marker = markerAt();
      const first = await lookup.find({ name: 'After a dead pass', value: 8 }, marker, Date.now());
      expect(first).toMatchObject({ kind: 'wait' });
      await new Promise((r) => setTimeout(r, 350));
      expect(found(await lookup.find({ name: 'After a dead pass', value: 8 }, marker, marker.sentAt))).toEqual([
        deal.id,
      ]);
      expect(await board.finish('dead-process', 0, undefined)).toBe(false); // its late finish changes nothing
    } finally {
      client.close();
    }
  });
});
