/**
 * Rows/s into the PostgreSQL history (issue 34, item 4): PgHistory buffers the field changes of
 * N succeeded results and writes them in its batches (500 rows an INSERT of unnest arrays), into
 * a schema of its own, dropped at the end.
 *
 *   npx tsx bench/history-postgres.ts [changes=100000] [postgres URL]
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PgHistory } from '../src/history/index.js';
import type { RowResult } from '../src/runs/index.js';

const N = Number(process.argv[2] ?? 100_000);
const URL = process.argv[3] ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `crm_sync_bench_history_${randomBytes(4).toString('hex')}`;
const admin = new pg.Client({ connectionString: URL });
await admin.connect();
await admin.query(`CREATE SCHEMA ${schema}`);
const history = new PgHistory({ url: URL, table: `${schema}.crm_sync_history`, maxPending: N + 1 });
try {
  await history.ping(); // the table exists before the clock starts
  const at = new Date().toISOString();
  const results: RowResult[] = Array.from({ length: N }, (_, i) => ({
    row: i + 1,
    status: 'succeeded',
    recordId: `c-${i}`,
    at,
    changes: { name: [`Contact name ${i}`, `Renamed contact ${i}`] },
  }));
  const start = performance.now();
  for (let i = 0; i < N; i += 1000) history.add('acme', 'bench-run', results.slice(i, i + 1000));
  while (history.stats.pending > 0) await history.flush();
  const ms = performance.now() - start;
  const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.crm_sync_history`);
  console.log(
    `${(rows[0] as { n: number }).n} field changes written in ${ms.toFixed(0)} ms: ${Math.round((N * 1000) / ms)} rows/s (batches of 500)`,
  );
} finally {
  await history.close();
  await admin.query(`DROP SCHEMA ${schema} CASCADE`);
  await admin.end();
}
