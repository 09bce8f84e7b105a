/**
 * What "Errors by cause" costs on a run page load (issue 14): groupProblems over a run whose
 * problem rows all have one cause, and over one with a cause per 100 rows.
 *
 *   npx tsx bench/problem-groups.ts [problem rows, default 20000]
 *
 * Prints the time of one grouping (median of 5) and the process's heap growth. Real Redis
 * (REDIS_URL or 127.0.0.1:6379), its own key prefix, removed at the end.
 */
import { Redis } from 'ioredis';
import { RunStore, groupProblems } from '../src/runs/index.js';
import { deleteKeysWithPrefix } from '../src/runtime/index.js';
import { seedFailedRun } from '../test/helpers/seed-runs.js';

const rows = Number(process.argv[2] ?? 20_000);
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const prefix = `crm-sync-bench-groups-${Date.now().toString(36)}`;
const store = new RunStore({ redis, prefix });

/** A run of `rows` failed rows whose messages fall into `causes` groups once ids are masked. */
function runWith(causes: number): Promise<string> {
  return seedFailedRun(store, rows, 'acme', (row) => {
    const cause = row % causes;
    return `stage_id: unknown stage stg_${row.toString(36)} (rule ${'abcdefghij'[cause % 10]}${'klmnopqrst'[Math.floor(cause / 10) % 10]}${'uvwxyzabcd'[Math.floor(cause / 100) % 10]})`;
  });
}

try {
  for (const causes of [1, Math.max(1, Math.floor(rows / 100))]) {
    const id = await runWith(causes);
    const times: number[] = [];
    const heap0 = process.memoryUsage().heapUsed;
    let groups = 0;
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const g = await groupProblems(store, id, { scanLimit: rows });
      times.push(performance.now() - t0);
      groups = g.groups.length;
    }
    times.sort((a, b) => a - b);
    const heap = (process.memoryUsage().heapUsed - heap0) / 1048576;
    console.log(
      `${rows} problem rows, ${causes} cause(s): ${groups} groups (cap 200), median ${times[2]!.toFixed(0)} ms per grouping (min ${times[0]!.toFixed(0)}, max ${times[4]!.toFixed(0)}), heap +${heap.toFixed(1)} MB`,
    );
  }
} finally {
  await deleteKeysWithPrefix(redis, prefix);
  await redis.quit();
}
