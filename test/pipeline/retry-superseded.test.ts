import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { retryRun } from '../../src/lifecycle/index.js';
import { retryWrittenLaterLines } from '../../src/cli/runs-actions.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';

/*
 * A retry of rows that a later run has written since (issue 31, item 3): the retry says, before
 * it sends anything, how many rows a later run already wrote in full; by default those are not
 * sent (superseded), rows with a field of their own still send it, and --resend-superseded
 * sends them as new writes that become the records' latest.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 30, retry: { attempts: 2, backoffMs: 20 } });
  await h.startWorkers();
});
afterAll(async () => h?.close());

/** Run A: value and name of six deals, failed by an outage; run B writes them after. */
async function failedRunThenLaterRun(offset: number, label: string) {
  const deals = [...h.ws.deals.values()].slice(offset, offset + 6);
  h.ws.setFaults({ errorRate: 1 });
  const a = h.file(
    `${label}-a.csv`,
    csv(
      ['id', 'name', 'value'],
      deals.map((d, i) => [d.id, `${label} A ${i}`, 100 + i]),
    ),
  );
  const runA = await h.waitForRun((await h.importFile(a, 'deal.update')).id, 30_000);
  h.ws.setFaults({});
  expect(runA.counts.failed).toBe(6);
  // Run B: the first three deals in full, the last three only their name.
  const b = h.file(
    `${label}-b.csv`,
    csv(
      ['id', 'name', 'value'],
      deals.map((d, i) => [d.id, `${label} B ${i}`, i < 3 ? 200 + i : '']),
    ),
  );
  const runB = await h.waitForRun((await h.importFile(b, 'deal.update')).id, 30_000);
  expect(runB.counts.succeeded).toBe(6);
  return { deals, runA };
}

describe('runs retry of rows a later run wrote', () => {
  it('by default sends only what no later run wrote, and says how many rows it will not send', async () => {
    const { deals, runA } = await failedRunThenLaterRun(0, 'skip');
    const writes = h.ws.stats.writes.dealUpdate;
    const summary = await retryRun({ runId: runA.id, queue: h.runtime.queue('acme'), store: h.runtime.store });
    expect(summary.writtenLater).toEqual({ skipped: 3, resent: 0 });
    expect(retryWrittenLaterLines(runA.id, summary.writtenLater)).toMatch(
      new RegExp(
        `^3 rows not sent again: later runs already wrote every field .*runs retry ${runA.id} --resend-superseded`,
      ),
    );
    const done = await h.waitForRun(runA.id, 30_000);
    expect(done.counts).toMatchObject({ total: 6, succeeded: 3, superseded: 3, failed: 0, queued: 0 });
    // Only the three rows with a field of their own (value) were sent.
    expect(h.ws.stats.writes.dealUpdate - writes).toBe(3);
    const results = await resultsByRow(h, runA.id);
    for (const [i, d] of deals.entries()) {
      const now = h.ws.deals.get(d.id)!;
      // Every field holds its latest writer's value: B's name everywhere, B's value on the first three.
      expect(now).toMatchObject({ name: `skip B ${i}`, value: i < 3 ? 200 + i : 100 + i });
      if (i < 3) {
        expect(results[i]).toMatchObject({ status: 'superseded', code: 'ROW_WRITTEN_LATER' });
        expect(results[i]!.message).toMatch(/^not sent again: later rows \(run .+\) wrote every field/);
      } else {
        expect(results[i]).toMatchObject({ status: 'succeeded' });
        expect(results[i]!.message).toMatch(/^sent value; name sent as the later row wrote it/);
      }
    }
  }, 60_000);

  it('with resendSuperseded sends the rows a later run wrote in full as new writes; the others keep their place', async () => {
    const { deals, runA } = await failedRunThenLaterRun(10, 'resend');
    const summary = await retryRun({
      runId: runA.id,
      queue: h.runtime.queue('acme'),
      store: h.runtime.store,
      resendSuperseded: true,
    });
    expect(summary.writtenLater).toEqual({ skipped: 0, resent: 3 });
    expect(retryWrittenLaterLines(runA.id, summary.writtenLater)).toMatch(
      /^3 rows a later run had written are sent as new/,
    );
    const done = await h.waitForRun(runA.id, 30_000);
    expect(done.counts).toMatchObject({ total: 6, succeeded: 6, superseded: 0, failed: 0 });
    const results = await resultsByRow(h, runA.id);
    for (const [i, d] of deals.entries()) {
      if (i < 3) {
        // Written in full by B, resent: A's values are the latest now.
        expect(h.ws.deals.get(d.id)).toMatchObject({ name: `resend A ${i}`, value: 100 + i });
        expect(results[i]!.message).toMatch(/^sent as a new write \(runs retry --resend-superseded\)/);
      } else {
        // B wrote only the name: the row keeps its place, sends its value, and B's name stays.
        expect(h.ws.deals.get(d.id)).toMatchObject({ name: `resend B ${i}`, value: 100 + i });
        expect(results[i]!.message).toMatch(/^sent value; name sent as the later row wrote it/);
      }
    }
  }, 60_000);

  it('the advice a default retry gives works afterwards: --resend-superseded takes the rows it did not send', async () => {
    const { deals, runA } = await failedRunThenLaterRun(20, 'advice');
    const queue = h.runtime.queue('acme');
    const first = await retryRun({ runId: runA.id, queue, store: h.runtime.store });
    expect(first.writtenLater.skipped).toBe(3);
    await h.waitForRun(runA.id, 30_000);
    const again = await retryRun({ runId: runA.id, queue, store: h.runtime.store, resendSuperseded: true });
    expect(again.progress.read).toBe(3);
    expect(again.writtenLater).toEqual({ skipped: 0, resent: 3 });
    const done = await h.waitForRun(runA.id, 30_000);
    expect(done.counts).toMatchObject({ total: 6, succeeded: 6, superseded: 0, failed: 0, queued: 0 });
    for (const [i, d] of deals.entries())
      expect(h.ws.deals.get(d.id)).toMatchObject(
        i < 3 ? { name: `advice A ${i}`, value: 100 + i } : { name: `advice B ${i}`, value: 100 + i },
      );
  }, 60_000);
});
