/**
 * A 1,000,000-row CSV import (generated): producer peak RSS, Redis used_memory peak (queue
 * data is bounded by the producer's high-water mark; per-row results are what grows), rows/s.
 *   npx tsx bench/million-rows.ts [rows=1000000] [highWater=10000]
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import {
  benchConfig,
  CLI,
  dropPrefix,
  removeBenchDir,
  fmt,
  peakRssMb,
  ROOT,
  sampleRedisMemory,
  spawnWorkerProcess,
  startSimProcess,
  stopProcesses,
} from './bench-lib.js';
import { RunKeys } from '../src/keys/index.js';
import { dealIds } from './ids.js';

const ROWS = Number(process.argv[2] ?? 1_000_000);
const HIGH_WATER = Number(process.argv[3] ?? 10_000);
const sim = await startSimProcess({ records: 1000 });
const ids = await dealIds(sim);
const b = benchConfig(sim);
const file = join(b.dir, 'million.csv');
const out = createWriteStream(file);
out.write('id,name,value\n');
for (let i = 0; i < ROWS; i++) {
  if (!out.write(`${ids[i % ids.length]},"Deal ${i}, bulk",${i % 100000}\n`))
    await new Promise<void>((r) => out.once('drain', () => r()));
}
out.end();
await finished(out);
console.log(`1M import: ${ROWS} rows generated in ${file}; high-water mark ${HIGH_WATER} rows`);

const workers = [spawnWorkerProcess(b, 32), spawnWorkerProcess(b, 32)];
await sleep(2500);
const stopSampling = sampleRedisMemory();
const started = Date.now();
const producer = spawn(
  process.execPath,
  [
    CLI,
    '--log-level',
    'warn',
    'import',
    file,
    '--op',
    'deal.update',
    '--workspace',
    'acme',
    '--high-water',
    String(HIGH_WATER),
    '--json',
  ],
  { cwd: ROOT, env: b.env, stdio: ['ignore', 'pipe', 'inherit'] },
);
let producerPeak = 0;
const rssTimer = setInterval(() => {
  try {
    producerPeak = Math.max(producerPeak, peakRssMb(producer.pid!));
  } catch {
    // the process has exited
  }
}, 200);
let output = '';
producer.stdout?.on('data', (d: Buffer) => (output += d.toString()));
await new Promise((r) => producer.once('exit', r));
clearInterval(rssTimer);
const produced = Date.now();
const runId = (JSON.parse(output) as { id: string }).id;
const redis = new Redis();
const runKey = new RunKeys(b.prefix).run({ id: runId, workspace: 'acme' });
for (;;) {
  const status = await redis.hget(runKey, 'status');
  if (status !== 'running') break;
  await sleep(500);
}
const done = Date.now();
const mem = await stopSampling();
const info = await redis.info('memory');
const endMb = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0) / 1024 / 1024;
const counts = await redis.hgetall(runKey);
console.log(
  `  producer: ${fmt((ROWS / (produced - started)) * 1000, 0)} rows/s ingested (enqueued, paced by the workers through the high-water mark), peak RSS ${fmt(producerPeak)} MB`,
);
console.log(
  `  pipeline: ${fmt((ROWS / (done - started)) * 1000, 0)} rows/s end to end, ${fmt((done - started) / 1000)} s`,
);
console.log(
  `  redis used_memory: start ${fmt(mem.startMb)} MB, peak ${fmt(mem.peakMb)} MB, end ${fmt(endMb)} MB (end - start = per-row results kept; peak - end = queue in flight)`,
);
console.log(
  `  run counts: ${JSON.stringify(Object.fromEntries(Object.entries(counts).filter(([k]) => /^(total|succeeded|failed|invalid|queued)$/.test(k))))}`,
);
redis.disconnect();
await stopProcesses(workers);
await dropPrefix(b.prefix);
removeBenchDir(b);
await sim.stop();
