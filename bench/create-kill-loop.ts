/**
 * Duplicate-safe creates under worker kills (issue #22's acceptance test): N deal creates with
 * unique names against a simulator that applies 20% of writes and then drops the connection,
 * with 200–800 ms per request (simulator --latency 200 + 0–600 ms uniform in our counting
 * proxy), 2 worker processes killed with SIGKILL at random every 1–3 s and restarted, for as
 * long as the run is running (bounded). Then, with workers running and no more kills, the run
 * is finished, and `runs retry <id>` is run twice. Finally every deal of the simulator is read
 * back and matched by name: found, duplicated, missing.
 *
 *   npx tsx bench/create-kill-loop.ts [rows=3000] [killMinutes=15] [settleMs=3000] [killMode=one|both] [latency=200] [extraMaxMs=600]
 *
 * killMode one: each kill picks one of the two workers at random; both: both are killed each time.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { silentLogger } from '../src/log/index.js';
import { openRuntime } from '../src/runtime/index.js';
import { importFile } from '../src/lifecycle/index.js';
import { dropPrefix } from './bench-lib.js';
import {
  auditDeals,
  createBenchConfig,
  fmtCounts,
  fmtTally,
  killNow,
  printLogSummary,
  printProblems,
  readSimDeals,
  runsRetry,
  spawnLoggedWorker,
  startCountingProxy,
  startFaultSim,
  stopChild,
  tallyDiff,
  waitRun,
  type Tally,
  type TallyKind,
} from './create-bench-lib.js';
import type { ChildProcess } from 'node:child_process';

const ROWS = Number(process.argv[2] ?? 3000);
const KILL_MINUTES = Number(process.argv[3] ?? 15);
const SETTLE_MS = Number(process.argv[4] ?? 3000);
const KILL_MODE = (process.argv[5] ?? 'one') as 'one' | 'both';
const SIM_LATENCY = Number(process.argv[6] ?? 200);
const EXTRA_MAX = Number(process.argv[7] ?? 600);
const DROP_RATE = 0.2;
const WORKERS = 2;
const CONCURRENCY = 8;
const LOCK_MS = 5000;
const AFTER_KILLS_TIMEOUT_MS = 45 * 60_000;
const RETRY_TIMEOUT_MS = 10 * 60_000;

const t0 = Date.now();
const secs = (from: number) => ((Date.now() - from) / 1000).toFixed(1);

const sim = await startFaultSim({ records: 100, latencyMs: SIM_LATENCY, dropRate: DROP_RATE });
const proxy = await startCountingProxy({ upstreamPort: sim.port, extraDelayMs: [0, EXTRA_MAX] });
const b = createBenchConfig({ name: 'killloop', proxyPort: proxy.port, createSettleMs: SETTLE_MS });
const runtime = await openRuntime(b.config, silentLogger);
const workers: Array<ChildProcess | undefined> = [];
let kills = 0;
let restarts = 0;

const tag = Date.now().toString(36);
const names = Array.from({ length: ROWS }, (_, i) => `KillLoop ${tag} ${String(i + 1).padStart(5, '0')}`);
const file = join(b.dir, 'creates.csv');
writeFileSync(file, `name,value\n${names.map((n, i) => `${n},${1000 + i}`).join('\n')}\n`);

console.log(
  `create kill loop: ${ROWS} deal creates (unique names), ${WORKERS} worker processes (concurrency ${CONCURRENCY}, --lock-ms ${LOCK_MS})`,
);
console.log(
  `  simulator: --drop-rate ${DROP_RATE} (write applied, then the connection dropped), --latency ${SIM_LATENCY} ms + 0–${EXTRA_MAX} ms uniform added by the counting proxy before forwarding = ${SIM_LATENCY}–${SIM_LATENCY + EXTRA_MAX} ms per request; 100 seeded deals`,
);
console.log(
  `  workspace config: ${JSON.stringify((b.raw.workspaces as Record<string, unknown>).acme)} (retry: default 6 attempts, 1000 ms backoff; requestTimeoutMs default 15000)`,
);
console.log(
  `  kills: SIGKILL every 1–3 s (uniform), mode "${KILL_MODE}", restarted at once, for as long as the run is running, at most ${KILL_MINUTES} min`,
);
console.log(`  redis prefix ${b.prefix}; worker log ${b.logFile}`);

const phaseTallies: Array<{ phase: string; tallies: Record<TallyKind, Tally> }> = [];
let lastSnap = proxy.snapshot();
function phaseEnd(phase: string): void {
  const now = proxy.snapshot();
  const diff = Object.fromEntries(
    (Object.keys(now) as TallyKind[]).map((k) => [k, tallyDiff(lastSnap[k], now[k])]),
  ) as Record<TallyKind, Tally>;
  phaseTallies.push({ phase, tallies: diff });
  lastSnap = now;
  console.log(`  [${phase}] POST /v2/deals: ${fmtTally(diff.createDeal)}`);
  console.log(`  [${phase}] GET /v2/deals list pages (page_size 100): ${fmtTally(diff.listDeals)}`);
  console.log(`  [${phase}] GET /v2/deals clock pages (page_size 1): ${fmtTally(diff.clockPage)}`);
}

async function stopAllWorkers(): Promise<void> {
  await Promise.all(workers.map((w) => (w ? stopChild(w, 15_000) : Promise.resolve())));
}

let exitCode = 0;
try {
  for (let i = 0; i < WORKERS; i++) workers[i] = spawnLoggedWorker(b, { concurrency: CONCURRENCY, lockMs: LOCK_MS });
  await sleep(1500);

  const importStart = Date.now();
  const { run } = await importFile({
    file,
    op: 'deal.create',
    workspace: 'acme',
    queue: runtime.queue('acme'),
    store: runtime.store,
  });
  console.log(`  run ${run.id}: ${run.counts.total} rows queued in ${secs(importStart)} s`);

  // Phase 1: kills while the run is running.
  const killUntil = Date.now() + KILL_MINUTES * 60_000;
  let lastPrint = Date.now();
  let status = (await runtime.store.requireRun(run.id)).status;
  while (status === 'running' && Date.now() < killUntil) {
    await sleep(1000 + Math.random() * 2000);
    status = (await runtime.store.requireRun(run.id)).status;
    if (status !== 'running') break;
    const victims = KILL_MODE === 'both' ? [...workers.keys()] : [Math.floor(Math.random() * WORKERS)];
    for (const v of victims) {
      const w = workers[v];
      if (w) {
        await killNow(w);
        kills++;
      }
      workers[v] = spawnLoggedWorker(b, { concurrency: CONCURRENCY, lockMs: LOCK_MS });
      restarts++;
    }
    if (Date.now() - lastPrint >= 30_000) {
      lastPrint = Date.now();
      const r = await runtime.store.requireRun(run.id);
      console.log(
        `    ${secs(importStart)} s: ${kills} kills; ${fmtCounts(r.counts)}; list pages answered so far ${proxy.tallies.listDeals.status['200'] ?? 0}`,
      );
    }
  }
  const phase1 = await runtime.store.requireRun(run.id);
  console.log(
    `phase 1 (kill loop) ended after ${secs(importStart)} s, ${kills} kills (${restarts} restarts): run ${phase1.status}${phase1.status === 'running' ? ' (kill time cap reached)' : ''}`,
  );
  console.log(`  counts: ${fmtCounts(phase1.counts)}`);
  phaseEnd('kill loop');

  // Phase 1b: no more kills; the same two (last started) workers finish the run.
  if (phase1.status === 'running') {
    const p1b = Date.now();
    const { run: after, timedOut } = await waitRun(runtime.store, run.id, AFTER_KILLS_TIMEOUT_MS, (r) =>
      console.log(`    +${secs(p1b)} s without kills: ${fmtCounts(r.counts)}`),
    );
    console.log(
      `phase 1b (no kills, workers running) ${timedOut ? 'TIMED OUT' : 'ended'} after ${secs(p1b)} s: run ${after.status}`,
    );
    console.log(`  counts: ${fmtCounts(after.counts)}`);
    phaseEnd('after kills');
    if (timedOut) exitCode = 1;
  }

  // Phase 2, 3: runs retry twice, workers running, no kills (only once the run is no longer running).
  for (const n of [1, 2]) {
    if ((await runtime.store.requireRun(run.id)).status === 'running') {
      console.log(`runs retry #${n}: skipped, the run is still running`);
      continue;
    }
    await printProblems(runtime.store, run.id);
    const p = Date.now();
    const r = await runsRetry(b, run.id);
    console.log(`runs retry #${n}: exit ${r.code}: ${r.out.replace(/\n/g, ' | ')}`);
    const { run: after, timedOut } = await waitRun(runtime.store, run.id, RETRY_TIMEOUT_MS, (x) =>
      console.log(`    +${secs(p)} s: ${fmtCounts(x.counts)}`),
    );
    console.log(
      `  after retry #${n} (${secs(p)} s${timedOut ? ', TIMED OUT' : ''}): run ${after.status}; ${fmtCounts(after.counts)}`,
    );
    phaseEnd(`retry ${n}`);
    if (timedOut) exitCode = 1;
  }

  await stopAllWorkers();
  const final = await runtime.store.requireRun(run.id);
  const read = await readSimDeals(sim.port);
  const audit = await auditDeals(runtime.store, run.id, names, read.deals);
  const total = proxy.tallies;
  console.log('final:');
  console.log(`  rows ${ROWS}; run ${final.status}; ${fmtCounts(final.counts)}`);
  console.log(`  results by kind: ${JSON.stringify(audit.resultKinds)}`);
  console.log(
    `  deals in the simulator: ${read.deals.length} (read back in ${read.pages} pages, ${read.failedTries} failed tries); of the file's names: ${audit.dealsFound} deals for ${audit.distinctNames} distinct names`,
  );
  console.log(
    `  duplicate deals: ${audit.extraDeals} extra deals over ${audit.duplicateNames} names; rows without a deal: ${audit.rowsWithoutDeal.length}`,
  );
  console.log(
    `  succeeded rows whose record id is not a deal of their name: ${audit.wrongRecordIds.length}; succeeded without id: ${audit.succeededWithoutId.length}`,
  );
  if (audit.examples.duplicates.length)
    console.log(`  duplicate examples: ${JSON.stringify(audit.examples.duplicates)}`);
  if (audit.examples.missing.length) console.log(`  missing examples: ${JSON.stringify(audit.examples.missing)}`);
  console.log(`  kills ${kills} (SIGKILL), worker starts ${restarts + WORKERS}`);
  console.log(`  POST /v2/deals in all: ${fmtTally(total.createDeal)}`);
  console.log(
    `  list pages (GET /v2/deals page_size 100) in all: ${fmtTally(total.listDeals)}; = ${((total.listDeals.status['200'] ?? 0) / Math.ceil(read.deals.length / 100)).toFixed(1)} full passes over the final list (${Math.ceil(read.deals.length / 100)} pages of 100)`,
  );
  console.log(`  clock pages (page_size 1) in all: ${fmtTally(total.clockPage)}`);
  printLogSummary(b.logFile);
  console.log(`  wall time ${secs(t0)} s`);
  if (audit.extraDeals > 0 || audit.rowsWithoutDeal.length > 0 || final.status === 'running') exitCode = 1;
} finally {
  await stopAllWorkers();
  await runtime.close();
  await proxy.close();
  await sim.stop();
  await dropPrefix(b.prefix);
  console.log(`  (redis prefix ${b.prefix} deleted; temp dir ${b.dir} kept for its worker log)`);
}
process.exit(exitCode);
