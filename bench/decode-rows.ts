/**
 * The row path without Redis or HTTP: read, tokenize and decode a generated file with the one
 * RowDecoder (strict values, control-character and unknown-key checks included). Prints rows/s
 * per format, so a slower decoder shows here before it shows in an import.
 *   npx tsx bench/decode-rows.ts [rows=200000]
 */
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { ingest } from '../src/ingest/index.js';

const ROWS = Number(process.argv[2] ?? 200_000);
const dir = mkdtempSync(join(tmpdir(), 'crm-sync-decode-'));

async function write(name: string, line: (i: number) => string, header?: string): Promise<string> {
  const path = join(dir, name);
  const out = createWriteStream(path);
  if (header !== undefined) out.write(header);
  for (let i = 0; i < ROWS; i++) if (!out.write(line(i))) await new Promise<void>((r) => out.once('drain', () => r()));
  out.end();
  await finished(out);
  return path;
}

const csvPath = await write(
  'deals.csv',
  (i) => `del_${i},"Deal ${i}, bulk",${i % 1000}.5,stg_1,t${i % 7};t${i % 3}\n`,
  'id,name,value,stage_id,tag_ids\n',
);
const ndjsonPath = await write(
  'deals.ndjson',
  (i) =>
    `${JSON.stringify({ id: `del_${i}`, name: `Deal ${i}`, value: i % 1000, stage_id: 'stg_1', tag_ids: [`t${i % 7}`] })}\n`,
);

for (const [format, path] of [
  ['csv', csvPath],
  ['ndjson', ndjsonPath],
] as const) {
  const started = process.hrtime.bigint();
  const { rows } = await ingest(path, { op: 'deal.update' });
  let payloads = 0;
  for await (const row of rows) if (row.payload !== undefined) payloads++;
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  console.log(
    `${format}: ${ROWS} rows decoded in ${ms.toFixed(0)} ms = ${Math.round((ROWS / ms) * 1000).toLocaleString('en-US')} rows/s (${payloads} payloads)`,
  );
}
rmSync(dir, { recursive: true, force: true });
