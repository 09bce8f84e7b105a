/**
 * Raw throughput with no rate limit: the full pipeline (file → producer → Redis → worker
 * process(es) → simulator) against a bare got loop with the same concurrency, same simulator,
 * same rows, in the same run. Both are warmed up first (unmeasured), then measured in
 * alternating rounds, because this shared 2-core machine's speed drifts between minutes.
 *
 *   npx tsx bench/throughput.ts [rows=20000] [concurrency=16] [worker processes=1] [rounds=3]
 *   BENCH_READ_BEFORE=false: the same without before-values kept (what keeping them costs)
 *   BENCH_ROWS_PER_JOB=N: N update rows per queue job (the workspace's rowsPerJob, default 10)
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { silentLogger } from '../src/log/index.js';
import { openRuntime } from '../src/runtime/index.js';
import {
  bareGot,
  benchConfig,
  cpuMeter,
  dropPrefix,
  importAndWait,
  redisPid,
  removeBenchDir,
  fmt,
  spawnWorkerProcess,
  startSimProcess,
  stopProcesses,
} from './bench-lib.js';
import { dealIds } from './ids.js';

const ROWS = Number(process.argv[2] ?? 20_000);
const CONCURRENCY = Number(process.argv[3] ?? 16);
/** Worker processes for the pipeline; the concurrency is split between them. */
const PROCESSES = Number(process.argv[4] ?? 1);
const ROUNDS = Number(process.argv[5] ?? 3);
const WARM_UP = Math.min(ROWS, 5000);

const sim = await startSimProcess({ records: 2000 });
const ids = await dealIds(sim);
const idOf = (i: number) => ids[i % ids.length]!;
const redis = await redisPid();

// Baseline: bare got, keep-alive, bounded concurrency, same PATCH bodies.
const bare = bareGot(sim, CONCURRENCY);
const { http } = bare;
/** `count` PATCHes through the bare loop; returns requests/s. */
async function bareLoop(count: number): Promise<number> {
  let next = 0;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const i = next++;
        await http.patch(`v2/deals/${idOf(i)}`, { json: { deal: { name: `Bare ${i}` } } }).json();
      }
    }),
  );
  return count / ((Date.now() - started) / 1000);
}

// Full pipeline: worker processes as production runs them, the producer in this process.
const b = benchConfig(sim);
const dealsCsv = (name: string, rows: number) => {
  const path = join(b.dir, name);
  writeFileSync(path, `id,name\n${Array.from({ length: rows }, (_, i) => `${idOf(i)},Pipe ${i}`).join('\n')}\n`);
  return path;
};
const file = dealsCsv('deals.csv', ROWS);
const runtime = await openRuntime(b.config, silentLogger);
const workers = Array.from({ length: PROCESSES }, () => spawnWorkerProcess(b, Math.ceil(CONCURRENCY / PROCESSES)));
await sleep(2500);
/** Imports the file and waits; returns rows/s from the run's own start and finish. */
async function pipelineRun(path: string): Promise<number> {
  const { run, startedAt } = await importAndWait(runtime, path);
  if (run.counts.succeeded !== run.counts.total)
    throw new Error(`pipeline run ${run.id} ended ${JSON.stringify(run.counts)}`);
  return run.counts.succeeded / ((Date.parse(run.finishedAt!) - startedAt) / 1000);
}

// Unmeasured warm-up of both sides, so neither pays for a cold JIT.
await bareLoop(WARM_UP);
await pipelineRun(dealsCsv('warm-up.csv', WARM_UP));

const perJob = b.config.workspaces.acme?.rowsPerJob ?? 1;
console.log(
  `throughput, ${ROWS} deal updates per round, concurrency ${CONCURRENCY} (${PROCESSES} worker process${PROCESSES > 1 ? 'es' : ''}, ${perJob} rows per job), no rate limit:`,
);
const ratios: number[] = [];
const cpu = { bare: {} as Record<string, number>, pipeline: {} as Record<string, number> };
const add = (into: Record<string, number>, used: Record<string, number>) => {
  for (const [k, s] of Object.entries(used)) into[k] = (into[k] ?? 0) + s;
};
for (let round = 1; round <= ROUNDS; round++) {
  const bareCpu = cpuMeter({ simulator: sim.child.pid, 'bare loop': process.pid });
  const bare = await bareLoop(ROWS);
  add(cpu.bare, bareCpu());
  const pipeCpu = cpuMeter({
    simulator: sim.child.pid,
    ...Object.fromEntries(workers.map((w, i) => [`worker ${i + 1}`, w.pid])),
    redis,
    'producer (this process)': process.pid,
  });
  const pipeline = await pipelineRun(file);
  add(cpu.pipeline, pipeCpu());
  ratios.push(pipeline / bare);
  console.log(
    `  round ${round}: bare got loop ${fmt(bare, 0)} requests/s, full pipeline ${fmt(pipeline, 0)} rows/s, ratio ${fmt(pipeline / bare, 2)}`,
  );
}
const sorted = [...ratios].sort((x, y) => x - y);
console.log(
  `  ratio: median ${fmt(sorted[Math.floor(sorted.length / 2)]!, 2)} (min ${fmt(sorted[0]!, 2)}, max ${fmt(sorted[sorted.length - 1]!, 2)})`,
);
// Both sides share the machine's cores with the simulator: CPU per row says where the time goes.
const perRow = (used: Record<string, number>) =>
  Object.entries(used)
    .map(([k, s]) => `${k} ${Number.isNaN(s) ? 'n/a' : fmt((s * 1000) / (ROWS * ROUNDS), 3)}`)
    .join(', ');
console.log(`  CPU ms per row, bare:     ${perRow(cpu.bare)}`);
console.log(`  CPU ms per row, pipeline: ${perRow(cpu.pipeline)}`);

bare.close();
await stopProcesses(workers);
await runtime.close();
await dropPrefix(b.prefix);
removeBenchDir(b);
await sim.stop();
