/**
 * The producer side of a database source: a 1M-row table (generate_series, in a schema of its
 * own, dropped at the end) read through the server-side cursor and the one RowDecoder, then the
 * same rows from a CSV file for comparison. Prints rows/s and peak RSS per source; fails (exit
 * 1) when the query's peak RSS is above 200 MB, the bound the cursor is there for.
 *   npx tsx bench/postgres-source.ts [rows=1000000]
 * PostgreSQL: TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import pg from 'pg';
import { Secret } from '../src/config/index.js';
import { ingest, openPostgresSource, type SourceReader } from '../src/ingest/index.js';

const ROWS = Number(process.argv[2] ?? 1_000_000);
const URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const RSS_LIMIT_MB = 200;
const schema = `crm_sync_bench_${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'crm-sync-pg-bench-'));
const mb = (bytes: number) => bytes / 1024 / 1024;

/** Reads every row of `source` through the decoder; rows/s and the peak RSS sampled while it ran. */
async function measure(label: string, source: string | SourceReader): Promise<{ rss: number }> {
  global.gc?.();
  let peak = process.memoryUsage().rss;
  let heap = 0;
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peak = Math.max(peak, m.rss);
    heap = Math.max(heap, m.heapUsed);
  }, 10);
  const started = process.hrtime.bigint();
  const { rows } = await ingest(source, { op: 'deal.update', extraColumns: ['deal_ref'] });
  let payloads = 0;
  let read = 0;
  for await (const row of rows) {
    read++;
    if (row.payload !== undefined) payloads++;
  }
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  console.log(
    `${label}: ${read.toLocaleString('en-US')} rows decoded in ${(ms / 1000).toFixed(1)} s = ${Math.round((read / ms) * 1000).toLocaleString('en-US')} rows/s ` +
      `(${payloads.toLocaleString('en-US')} payloads), peak RSS ${mb(peak).toFixed(0)} MB, peak heap used ${mb(heap).toFixed(0)} MB`,
  );
  return { rss: peak };
}

const admin = new pg.Client({ connectionString: URL });
await admin.connect();
try {
  await admin.query(`CREATE SCHEMA ${schema}`);
  const made = Date.now();
  await admin.query(
    `CREATE TABLE ${schema}.deals AS
       SELECT 'R-' || g AS deal_ref, 'del_' || g AS id, 'Deal ' || g || ', bulk' AS name,
              (g % 1000) + 0.5 AS value, 'stg_1' AS stage_id, ARRAY['t' || g % 7, 't' || g % 3] AS tag_ids
         FROM generate_series(1, $1::int) g`,
    [ROWS],
  );
  console.log(`table of ${ROWS.toLocaleString('en-US')} rows made in ${((Date.now() - made) / 1000).toFixed(1)} s`);
  const baseline = mb(process.memoryUsage().rss);
  console.log(`RSS before reading: ${baseline.toFixed(0)} MB (Node ${process.version})`);

  const source = openPostgresSource({
    url: new Secret(URL),
    urlSource: { env: 'TEST_DATABASE_URL' },
    query: `select deal_ref, id, name, value, stage_id, tag_ids from ${schema}.deals`,
    keyColumn: 'deal_ref',
    ...(process.env.BATCH_ROWS ? { batchRows: Number(process.env.BATCH_ROWS) } : {}),
  });
  const query = await measure(`postgres (cursor, ${process.env.BATCH_ROWS ?? 500} rows a read)`, source);

  // The same rows as a CSV file (the list column joined with ;, as an export writes it).
  const csvPath = join(dir, 'deals.csv');
  const out = createWriteStream(csvPath);
  out.write('deal_ref,id,name,value,stage_id,tag_ids\n');
  for (let g = 1; g <= ROWS; g++) {
    const line = `R-${g},del_${g},"Deal ${g}, bulk",${(g % 1000) + 0.5},stg_1,t${g % 7};t${g % 3}\n`;
    if (!out.write(line)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  out.end();
  await finished(out);
  await measure('csv file', csvPath);

  if (mb(query.rss) > RSS_LIMIT_MB) {
    console.error(`FAIL: the query's peak RSS ${mb(query.rss).toFixed(0)} MB is above ${RSS_LIMIT_MB} MB`);
    process.exitCode = 1;
  } else console.log(`ok: the query's peak RSS is within ${RSS_LIMIT_MB} MB`);
} finally {
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
}
