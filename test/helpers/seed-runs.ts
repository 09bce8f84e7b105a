import type { RunStore } from '../../src/runs/index.js';

/** The default failure text: "unknown stage <n>", and "needle stage <n>" every 1,000th row (for searches). */
const STAGE_MESSAGE = (row: number): string => (row % 1000 === 0 ? `needle stage ${row}` : `unknown stage stg_${row}`);

/** A run with `count` failed rows (HTTP 422, `message` of each row), written straight to the store. */
export async function seedFailedRun(
  store: RunStore,
  count: number,
  workspace = 'acme',
  message: (row: number) => string = STAGE_MESSAGE,
): Promise<string> {
  const run = await store.createRun({
    workspace,
    operation: 'deal.update',
    source: 'seeded.csv',
    columns: ['id', 'name', 'stage_id'],
  });
  await store.addQueued(run.id, count);
  const at = new Date().toISOString();
  for (let first = 1; first <= count; first += 1000) {
    const batch = [];
    for (let row = first; row < first + 1000 && row <= count; row++) {
      batch.push({
        row,
        line: row + 1,
        status: 'failed' as const,
        code: 'CRM_REJECTED' as const,
        httpStatus: 422,
        message: message(row),
        original: { id: `d${row}`, name: `Deal ${row}`, stage_id: `stg_${row}` },
        at,
      });
    }
    await store.recordResults(run.id, batch);
  }
  await store.finishProducing(run.id);
  return run.id;
}
