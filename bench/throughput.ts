/**
 * Raw throughput with no rate limit: the full pipeline (file → producer → Redis → a worker
 * process → simulator) against a bare got loop with the same concurrency, same simulator,
 * same rows, in the same run.   npx tsx bench/throughput.ts [rows=20000] [concurrency=16]
 */
import { Agent } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import got from 'got';
import { configFromObject } from '../src/config/index.js';
import { loopbackLookup } from '../src/crm/index.js';
import { silentLogger } from '../src/log/index.js';
import { importFile } from '../src/queue/index.js';
import { openRuntime } from '../src/runtime/index.js';
import { benchConfig, dropPrefix, removeBenchDir, fmt, spawnWorkerProcess, startSimProcess, stopProcesses } from './bench-lib.js';
import { dealIds } from './ids.js';

const ROWS = Number(process.argv[2] ?? 20_000);
const CONCURRENCY = Number(process.argv[3] ?? 16);
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
let next = 0;
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
agent.destroy();

// Full pipeline.
const b = benchConfig(sim);
const file = join(b.dir, 'deals.csv');
writeFileSync(file, `id,name\n${Array.from({ length: ROWS }, (_, i) => `${idOf(i)},Pipe ${i}`).join('\n')}\n`);
process.env.BENCH_KEY = sim.apiKey;
const config = configFromObject({ workspaces: { acme: { baseUrl: sim.baseUrl, apiKeyEnv: 'BENCH_KEY' } } }, { source: 'bench', env: b.env });
const runtime = await openRuntime(config, silentLogger);
const worker = spawnWorkerProcess(b, CONCURRENCY);
await sleep(2500);
const t1 = Date.now();
const { run } = await importFile({ file, op: 'deal.update', workspace: 'acme', queue: runtime.queue('acme'), store: runtime.store });
let final = run;
while (final.status === 'running') {
  await sleep(100);
  final = await runtime.store.requireRun(run.id);
}
const pipeline = final.counts.succeeded / ((Date.parse(final.finishedAt!) - t1) / 1000);
console.log(`throughput, ${ROWS} deal updates, concurrency ${CONCURRENCY}, no rate limit:`);
console.log(`  bare got loop:  ${fmt(bare, 0)} requests/s`);
console.log(`  full pipeline:  ${fmt(pipeline, 0)} rows/s (${final.counts.succeeded} succeeded, ${final.counts.failed} failed)`);
console.log(`  ratio:          ${fmt(pipeline / bare, 2)}`);
await stopProcesses([worker]);
await runtime.close();
await dropPrefix(b.prefix);
removeBenchDir(b);
await sim.stop();
