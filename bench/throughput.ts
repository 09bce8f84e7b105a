/**
 * Raw throughput with no rate limit: the full pipeline (file → producer → Redis → a worker
 * process → simulator) against a bare got loop with the same concurrency, same simulator,
 * same rows, in the same run.   npx tsx bench/throughput.ts [rows=20000] [concurrency=16] [worker processes=1]
 */
import { Agent } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import got from 'got';
import { loopbackLookup } from '../src/crm/index.js';
import { silentLogger } from '../src/log/index.js';
import { openRuntime } from '../src/runtime/index.js';
import { benchConfig, cpuMeter, dropPrefix, importAndWait, redisPid, removeBenchDir, fmt, spawnWorkerProcess, startSimProcess, stopProcesses } from './bench-lib.js';
import { dealIds } from './ids.js';

const ROWS = Number(process.argv[2] ?? 20_000);
const CONCURRENCY = Number(process.argv[3] ?? 16);
/** Worker processes for the pipeline; the concurrency is split between them. */
const PROCESSES = Number(process.argv[4] ?? 1);
const sim = await startSimProcess({ records: 2000 });
const ids = await dealIds(sim);
const idOf = (i: number) => ids[i % ids.length]!;

// Baseline: bare got, keep-alive, bounded concurrency, same PATCH bodies.
const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const http = got.extend({
  prefixUrl: `${sim.baseUrl}/`,
  headers: { 'x-api-key': sim.apiKey, accept: 'application/json' },
  agent: { http: agent },
  dnsLookup: loopbackLookup,
  retry: { limit: 0 },
});
const redis = await redisPid();
let next = 0;
const bareCpu = cpuMeter({ simulator: sim.child.pid, 'bare loop': process.pid });
const t0 = Date.now();
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (next < ROWS) {
      const i = next++;
      await http.patch(`v2/deals/${idOf(i)}`, { json: { deal: { name: `Bare ${i}` } } }).json();
    }
  }),
);
const bare = ROWS / ((Date.now() - t0) / 1000);
const bareUsed = bareCpu();
agent.destroy();

// Full pipeline.
const b = benchConfig(sim);
const file = join(b.dir, 'deals.csv');
writeFileSync(file, `id,name\n${Array.from({ length: ROWS }, (_, i) => `${idOf(i)},Pipe ${i}`).join('\n')}\n`);
const runtime = await openRuntime(b.config, silentLogger);
const workers = Array.from({ length: PROCESSES }, () => spawnWorkerProcess(b, Math.ceil(CONCURRENCY / PROCESSES)));
await sleep(2500);
const pipeCpu = cpuMeter({
  simulator: sim.child.pid,
  ...Object.fromEntries(workers.map((w, i) => [`worker ${i + 1}`, w.pid])),
  redis,
  'producer (this process)': process.pid,
});
const { run: final, startedAt: t1 } = await importAndWait(runtime, file);
const pipeUsed = pipeCpu();
const pipeline = final.counts.succeeded / ((Date.parse(final.finishedAt!) - t1) / 1000);
console.log(`throughput, ${ROWS} deal updates, concurrency ${CONCURRENCY} (${PROCESSES} worker process${PROCESSES > 1 ? 'es' : ''}), no rate limit:`);
console.log(`  bare got loop:  ${fmt(bare, 0)} requests/s`);
console.log(`  full pipeline:  ${fmt(pipeline, 0)} rows/s (${final.counts.succeeded} succeeded, ${final.counts.failed} failed)`);
console.log(`  ratio:          ${fmt(pipeline / bare, 2)}`);
// Both phases share one machine's cores with the simulator: CPU per row says where the time goes.
const perRow = (used: Record<string, number>) =>
  Object.entries(used).map(([k, s]) => `${k} ${Number.isNaN(s) ? 'n/a' : fmt((s * 1000) / ROWS, 3)}`).join(', ');
console.log(`  CPU ms per row, bare:     ${perRow(bareUsed)}`);
console.log(`  CPU ms per row, pipeline: ${perRow(pipeUsed)}`);
await stopProcesses(workers);
await runtime.close();
await dropPrefix(b.prefix);
removeBenchDir(b);
await sim.stop();
