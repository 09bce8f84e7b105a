import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerPool } from '../../src/worker/index.js';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';

/*
 * Write order is per field (issue 30, item 0): a file whose rows fill different columns of one
 * record — a row setting `value`, a row ten rows later setting `status` (empty cells are left
 * out of the request) — must give every record both, with no fault at all and however many
 * workers take the rows out of order. Two rows writing the same field stay last-writer-wins by
 * row order.
 */

const DEALS = 100;
const STATUSES = ['won', 'lost', 'in_progress'] as const;

let h: Harness;
const pools: WorkerPool[] = [];

beforeAll(async () => {
  h = await startHarness({ records: DEALS, seed: 30, latencyMs: 5 });
});
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});
afterAll(async () => h?.close());

/**
 * For each deal, a value row, then ten rows later a status row; the file ends with a second
 * value row for every fifth deal (the same field twice: the later row must win).
 */
function partialRowsFile(round: number) {
  const deals = [...h.ws.deals.values()].slice(0, DEALS);
  const rows: Array<Array<string | number>> = [];
  for (let g = 0; g < DEALS; g += 10) {
    const group = deals.slice(g, g + 10);
    for (const [i, d] of group.entries()) rows.push([d.id, d.name, round * 10_000 + g + i, '']);
    for (const [i, d] of group.entries()) rows.push([d.id, d.name, '', STATUSES[(g + i + round) % 3]!]);
  }
  const twice = deals.filter((_, i) => i % 5 === 0);
  for (const d of twice) rows.push([d.id, d.name, round * 10_000 + 5000 + deals.indexOf(d), '']);
  const expected = new Map(
    deals.map((d, i) => [
      d.id,
      { value: round * 10_000 + (i % 5 === 0 ? 5000 + i : i), status: STATUSES[(i + round) % 3]! },
    ]),
  );
  return { file: h.file(`partial-${round}.csv`, csv(['id', 'name', 'value', 'status'], rows)), expected, rows };
}

async function runAndCheck(round: number) {
  const { file, expected, rows } = partialRowsFile(round);
  const run = await h.waitForRun((await h.importFile(file, 'deal.update')).id, 60_000);
  const results = await resultsByRow(h, run.id);
  const wrong = [...expected].filter(([id, want]) => {
    const d = h.ws.deals.get(id)!;
    return d.value !== want.value || d.status !== want.status;
  });
  return { run, results, wrong, rows };
}

describe('rows that fill different fields of one record (no fault)', () => {
  it('one worker at its default concurrency: every deal holds both its value and its status', async () => {
    pools.push(await h.startWorkers());
    const { run, results, wrong, rows } = await runAndCheck(1);
    expect(run.status).toBe('completed');
    expect(results).toHaveLength(rows.length);
    expect(wrong).toEqual([]);
    // No value row is dropped: only a row whose every field a later row wrote is superseded
    // (an early value row of a deal written twice), and its result says which row wrote it.
    const superseded = results.filter((r) => r.status === 'superseded');
    for (const r of superseded) {
      expect(r.row).toBeLessThanOrEqual(DEALS * 2);
      expect(r.message).toMatch(/^not sent: later rows wrote every field .* \(value by row \d+ of run /);
    }
    expect(results.filter((r) => r.status !== 'succeeded' && r.status !== 'superseded')).toEqual([]);
  }, 90_000);

  it('two workers × 6: every deal holds both, and a row sent in part says what it left out', async () => {
    pools.push(await h.startWorkers({ concurrency: 6 }), await h.startWorkers({ concurrency: 6 }));
    const { run, results, wrong } = await runAndCheck(2);
    expect(run.status).toBe('completed');
    expect(wrong).toEqual([]);
    expect(results.filter((r) => r.status !== 'succeeded' && r.status !== 'superseded')).toEqual([]);
    // A value row that went after its status row sent its value, and its name with the value
    // the status row wrote (a deal update requires a name).
    const partly = results.filter((r) => r.status === 'succeeded' && r.message?.startsWith('sent '));
    for (const r of partly) expect(r.message).toMatch(/^sent value; name sent as the later row wrote it/);
  }, 90_000);
});
