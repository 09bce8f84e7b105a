/**
 * Rate utilisation: the simulator allows 50 requests/s; 2 and then 4 worker processes share the
 * known limit through Redis. Prints achieved rows/s as a share of the limit and the 429 ratio.
 *   npx tsx bench/rate-utilisation.ts [rows=3000]
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { silentLogger } from '../src/log/index.js';
import { readCounters, METRIC } from '../src/metrics/index.js';
import { openRuntime } from '../src/runtime/index.js';
import { benchConfig, dropPrefix, importAndWait, removeBenchDir, fmt, spawnWorkerProcess, startSimProcess, stopProcesses } from './bench-lib.js';
import { dealIds } from './ids.js';

const ROWS = Number(process.argv[2] ?? 3000);
const LIMIT = 50;

const sim = await startSimProcess({ records: ROWS, rate: `${LIMIT}/s` });
const ids = (await dealIds(sim)).slice(0, ROWS);
await sleep(1500); // let the simulator's bucket refill after paging the ids
console.log(`rate utilisation: ${ROWS} deal updates, simulator limit ${LIMIT} req/s`);
for (const processes of [2, 4]) {
  const b = benchConfig(sim, { max: LIMIT, durationMs: 1000 });
  const file = join(b.dir, 'deals.csv');
  writeFileSync(file, `id,name\n${ids.map((id, i) => `${id},Bench ${processes}-${i}`).join('\n')}\n`);
  const runtime = await openRuntime(b.config, silentLogger);
  const workers = Array.from({ length: processes }, () => spawnWorkerProcess(b, 8));
  await sleep(2500); // workers connect and apply the shared limit
  const { run: final, startedAt: started } = await importAndWait(runtime, file, 200);
  const seconds = (Date.parse(final.finishedAt ?? new Date().toISOString()) - started) / 1000;
  await sleep(1200); // workers flush their counters every second
  const counters = await readCounters(runtime.redis, b.prefix);
  const requests = counters.filter((c) => c.metric === METRIC.requests).reduce((n, c) => n + c.value, 0);
  const limited = counters.filter((c) => c.metric === METRIC.rateLimited).reduce((n, c) => n + c.value, 0);
  const rate = final.counts.succeeded / seconds;
  console.log(
    `${processes} worker processes: ${final.counts.succeeded}/${ROWS} succeeded in ${fmt(seconds)} s = ${fmt(rate)} rows/s ` +
      `(${fmt((rate / LIMIT) * 100)}% of the limit); requests ${requests}, 429s ${limited} (${fmt((limited / Math.max(1, requests)) * 100, 2)}%)`,
  );
  await stopProcesses(workers);
  await runtime.close();
  await dropPrefix(b.prefix);
  removeBenchDir(b);
  await sleep(1500);
}
await sim.stop();
