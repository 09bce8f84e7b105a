import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log/index.js';
import { findPossiblyCreatedDeal } from '../../src/reconcile/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';

describe('duplicate-safe deal creates', () => {
  let h: Harness;
  beforeAll(async () => {
    // Short backoff: the test is about what a retry does, not how long it waits.
    h = await startHarness({ records: 5, seed: 3, retry: { attempts: 12, backoffMs: 5 } });
    await h.startWorkers({ concurrency: 16 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('1,000 creates at 20% commit-then-drop end with exactly 1,000 new deals', async () => {
    const before = h.ws.deals.size;
    const rows = Array.from({ length: 1000 }, (_, i) => [`Dup-safe deal ${i + 1}`, 100 + i, i % 2 ? 'won' : 'in_progress']);
    const file = h.file('creates.csv', csv(['name', 'value', 'status'], rows));
    h.ws.setFaults({ commitThenDropRate: 0.2 });
    let done;
    try {
      done = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 45_000);
    } finally {
      h.ws.setFaults(null);
    }

    expect(h.ws.stats.drops).toBeGreaterThan(100); // the fault really fired
    expect(done.counts).toMatchObject({ total: 1000, succeeded: 1000, failed: 0 });
    expect(h.ws.deals.size).toBe(before + 1000);
    const names = new Set([...h.ws.deals.values()].map((d) => d.name));
    expect(names.size).toBe(h.ws.deals.size);
    // Every row recorded a distinct deal, and it is the one with the row's name.
    const results = await resultsByRow(h, done.id);
    expect(new Set(results.map((r) => r.recordId)).size).toBe(1000);
    for (const r of results) expect(h.ws.deals.get(r.recordId!)?.name).toBe(`Dup-safe deal ${r.row}`);
  }, 60_000);

  it('a create requeued after a 429 does not page the deal list (only a possibly committed attempt does)', async () => {
    const before = h.ws.deals.size;
    h.ws.resetStats();
    h.ws.setRateLimit({ max: 2, windowMs: 200 });
    const file = h.file('limited.csv', csv(['name', 'value'], Array.from({ length: 30 }, (_, i) => [`Limited deal ${i + 1}`, i])));
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

  it('finds a deal by name and sent fields, created since the run, unless claimed', async () => {
    const since = new Date().toISOString();
    const made = h.ws.createDeal({ name: 'Possibly created', value: 5, status: 'won' });
    const client = createCrmClient(h.config, 'acme', silentLogger);
    try {
      const fields = { name: 'Possibly created', value: 5, status: 'won' as const };
      expect(await findPossiblyCreatedDeal(client, fields, { since, claimed: new Set() })).toBe(made.id);
      expect(await findPossiblyCreatedDeal(client, fields, { since, claimed: new Set([made.id]) })).toBeUndefined();
      expect(await findPossiblyCreatedDeal(client, { ...fields, value: 6 }, { since, claimed: new Set() })).toBeUndefined();
      const later = new Date(Date.now() + 3_600_000).toISOString();
      expect(await findPossiblyCreatedDeal(client, fields, { since: later, claimed: new Set() })).toBeUndefined();
    } finally {
      client.close();
    }
  });
});
