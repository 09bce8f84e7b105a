import { readFileSync, writeFileSync } from 'node:fs';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { retryRun } from '../../src/lifecycle/index.js';
import { writeResultsCsv } from '../../src/runs/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';

let h: Harness;
beforeAll(async () => {
  // Counts the CRM's requests and tokens exactly: no list reads of before-values (readBefore) among them.
  h = await startHarness({ records: 20, retry: { attempts: 3, backoffMs: 50 }, workspace: { readBefore: false } });
  await h.startWorkers();
});
afterAll(async () => h?.close());

async function exportFailed(runId: string): Promise<string> {
  const path = join(h.dir, `${runId}-failed.csv`);
  const out = createWriteStream(path);
  await writeResultsCsv(h.runtime.store, runId, out, { problemsOnly: true });
  out.end();
  await finished(out);
  return path;
}

describe('export → fix → retry', () => {
  it('closes the failed and invalid rows of a run', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 6);
    const rows = deals.map((d, i) => [d.id, `Fixed ${i}`, String(100 + i), h.ws.stages[0]!.id]);
    rows[1]![3] = 'stg_missing'; // 422 from the CRM
    rows[4]![2] = '=1+1'; // invalid value, and a formula-looking cell
    const file = h.file('deals.csv', csv(['id', 'name', 'value', 'stage_id'], rows));
    const run = await h.waitForRun((await h.importFile(file, 'deal.update')).id);
    expect(run.counts).toMatchObject({ succeeded: 4, failed: 1, invalid: 1 });

    const exported = await exportFailed(run.id);
    const records = parse(readFileSync(exported), { columns: true }) as Array<Record<string, string>>;
    expect(records.map((r) => r.crm_sync_row)).toEqual(['2', '5']);
    expect(records[1]!.value).toBe("'=1+1");
    // The operator fixes both rows in the spreadsheet and saves.
    records[0]!.stage_id = h.ws.stages[0]!.id;
    records[1]!.value = '104';
    const header = Object.keys(records[0]!);
    writeFileSync(
      exported,
      csv(
        header,
        records.map((r) => header.map((k) => r[k]!)),
      ),
    );

    const summary = await retryRun({
      runId: run.id,
      queue: h.runtime.queue('acme'),
      store: h.runtime.store,
      file: exported,
    });
    expect(summary.ignored).toEqual([]);
    const done = await h.waitForRun(run.id);
    expect(done).toMatchObject({
      status: 'completed',
      counts: { total: 6, succeeded: 6, failed: 0, invalid: 0, queued: 0 },
    });
    expect(h.ws.deals.get(deals[1]!.id)?.stage_id).toBe(h.ws.stages[0]!.id);
    expect(h.ws.deals.get(deals[4]!.id)?.value).toBe(104);
  });

  it('retries stored failed rows as they were once the cause is gone', async () => {
    const deals = [...h.ws.deals.values()].slice(10, 14);
    const errorsBefore = h.ws.stats.errors5xx;
    h.ws.setFaults({ errorRate: 1 });
    const file = h.file(
      'deals2.csv',
      csv(
        ['id', 'name'],
        deals.map((d) => [d.id, 'Retry me']),
      ),
    );
    const { id } = await h.importFile(file, 'deal.update');
    try {
      // Every answer a 5xx: the rows fail once their 3 attempts are spent.
      const failed = await h.waitForRun(id, 60_000);
      expect(failed.counts.failed).toBe(4);
      expect(h.ws.stats.errors5xx - errorsBefore).toBe(4 * 3); // each row tried its 3 attempts, no more
    } finally {
      h.ws.setFaults(null); // later tests share this simulator
    }
    await retryRun({ runId: id, queue: h.runtime.queue('acme'), store: h.runtime.store });
    const done = await h.waitForRun(id);
    expect(done.counts).toMatchObject({ succeeded: 4, failed: 0 });
    for (const d of deals) expect(h.ws.deals.get(d.id)?.name).toBe('Retry me');
  }, 30_000);

  it('refuses to retry into a paused workspace queue instead of waiting on it', async () => {
    const d = [...h.ws.deals.values()][15]!;
    const run = await h.waitForRun(
      (await h.importFile(h.file('p.csv', csv(['id', 'name'], [[d.id, '']])), 'deal.update')).id,
    );
    expect(run.counts.invalid).toBe(1);
    const queue = h.runtime.queue('acme');
    await queue.pause();
    try {
      await expect(retryRun({ runId: run.id, queue, store: h.runtime.store })).rejects.toThrow(
        /paused: resume the workspace/,
      );
      expect((await h.runtime.store.requireRun(run.id)).counts.invalid).toBe(1);
    } finally {
      await queue.resume();
    }
  });
});
