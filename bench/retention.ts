/**
 * Redis memory under retention: 30 simulated nightly runs of N rows each (default 100,000;
 * 5% failed rows, which keep their source values, the rest succeeded), each recorded through
 * the run store's own scripts as a nightly sync would leave it, with `retention` of K days
 * (default 7) applied by the same pruneRuns the workers' housekeeping runs after each night.
 * Prints Redis used_memory after every night: it grows for K nights, then stays flat.
 *
 *   npx tsx bench/retention.ts [rowsPerNight=100000] [nights=30] [retentionDays=7]
 *
 * Targets REDIS_URL (default 127.0.0.1:6379) under its own key prefix, removed at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { failed, pruneRuns, RunStore, succeeded, type RowResult } from '../src/runs/index.js';
import { deleteKeysWithPrefix } from '../src/runtime/index.js';

const rowsPerNight = Number(process.argv[2] ?? 100_000);
const nights = Number(process.argv[3] ?? 30);
const retentionDays = Number(process.argv[4] ?? 7);
const DAY = 86_400_000;
const CHUNK = 5000;

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const prefix = `crm-sync-bench-retention-${randomBytes(3).toString('hex')}`;
const store = new RunStore({ redis, prefix });
const resultsDir = mkdtempSync(join(tmpdir(), 'crm-sync-retention-'));

async function usedMb(): Promise<number> {
  const info = await redis.info('memory');
  return Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0) / 1024 / 1024;
}

function result(row: number): RowResult {
  const place = { row, line: row + 1 };
  return row % 20 === 0
    ? failed(
        place,
        { code: 'CRM_NOT_FOUND', message: 'Deal not found', httpStatus: 404 },
        { id: `del_${row}`, name: `Deal ${row}`, value: String(row) },
      )
    : succeeded(place, `del_${row}`);
}

try {
  const baseline = await usedMb();
  const start = Date.now() - nights * DAY;
  console.log(
    `retention bench: ${nights} nights x ${rowsPerNight} rows, retention ${retentionDays} days; Redis used_memory before: ${baseline.toFixed(1)} MB`,
  );
  console.log('night  runs-in-redis  pruned  archived-rows  used_memory-MB  night-s');
  for (let night = 1; night <= nights; night++) {
    const began = Date.now();
    const at = start + night * DAY;
    const run = await store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: `nightly-${night}.csv`,
      syncName: 'nightly',
      columns: ['id', 'name', 'value'],
      createdAt: new Date(at),
    });
    for (let first = 1; first <= rowsPerNight; first += CHUNK) {
      const batch: RowResult[] = [];
      for (let row = first; row < first + CHUNK && row <= rowsPerNight; row++) batch.push(result(row));
      await store.recordResults(run.id, batch, { fromQueue: false });
    }
    await store.finishProducing(run.id);
    // What the housekeeping does after the night (the clock is the simulated one).
    const pruned = await pruneRuns({ store, resultsDir, olderThanMs: retentionDays * DAY, now: at + 60_000 });
    const inRedis = (await store.listRuns({ limit: 0 })).total;
    const mb = await usedMb();
    console.log(
      `${String(night).padStart(5)}  ${String(inRedis).padStart(13)}  ${String(pruned.runs.length).padStart(6)}  ${String(pruned.archivedRows).padStart(13)}  ${mb.toFixed(1).padStart(14)}  ${((Date.now() - began) / 1000).toFixed(1).padStart(7)}`,
    );
  }
} finally {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
  rmSync(resultsDir, { recursive: true, force: true });
}
