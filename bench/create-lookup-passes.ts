/**
 * Shared lookup passes (issue #17 item 5): N deal creates (unique names) against a simulator
 * that answers 30% of requests 500/502/503 without applying them and resets 10% of connections
 * without an answer (both on every request, list pages included; a 5xx or reset on a POST
 * leaves the create in doubt: settle time, then a lookup over the deal list). No kills. A
 * counting proxy of our own between workers and simulator counts the list pages
 * (GET /v2/deals) the lookups request. Then the deals are read back and matched by name.
 * If rows end failed or uncertain, `runs retry` is run (at most twice) and reported apart.
 *
 *   npx tsx bench/create-lookup-passes.ts [rows=2000] [workers=2] [latency=300] [settleMs=3000]
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChildProcess } from 'node:child_process';
import { silentLogger } from '../src/log/index.js';
import { openRuntime } from '../src/runtime/index.js';
import { importFile } from '../src/lifecycle/index.js';
import { dropPrefix } from './bench-lib.js';
import {
  auditDeals,
  createBenchConfig,
  fmtCounts,
  fmtTally,
  printLogSummary,
  printProblems,
  readSimDeals,
  runsRetry,
  spawnLoggedWorker,
  startCountingProxy,
  startFaultSim,
  stopChild,
  waitRun,
  type Tally,
} from './create-bench-lib.js';

const ROWS = Number(process.argv[2] ?? 2000);
const WORKERS = Number(process.argv[3] ?? 2);
const LATENCY = Number(process.argv[4] ?? 300);
const SETTLE_MS = Number(process.argv[5] ?? 3000);
const ERROR_RATE = 0.3;
const RESET_RATE = 0.1;
const SEEDED = 100;
const CONCURRENCY = 8;
const RUN_TIMEOUT_MS = 60 * 60_000;
const RETRY_TIMEOUT_MS = 30 * 60_000;

const t0 = Date.now();
const secs = (from: number) => ((Date.now() - from) / 1000).toFixed(1);

const sim = await startFaultSim({ records: SEEDED, latencyMs: LATENCY, errorRate: ERROR_RATE, resetRate: RESET_RATE });
const proxy = await startCountingProxy({ upstreamPort: sim.port });
const b = createBenchConfig({ name: 'lookuppasses', proxyPort: proxy.port, createSettleMs: SETTLE_MS });
const runtime = await openRuntime(b.config, silentLogger);
const workers: ChildProcess[] = [];

const tag = Date.now().toString(36);
const names = Array.from({ length: ROWS }, (_, i) => `Passes ${tag} ${String(i + 1).padStart(5, '0')}`);
const file = join(b.dir, 'creates.csv');
writeFileSync(file, `name,value\n${names.map((n, i) => `${n},${5000 + i}`).join('\n')}\n`);

console.log(
  `create lookup passes: ${ROWS} deal creates (unique names), ${WORKERS} worker process(es) at concurrency ${CONCURRENCY}, no kills`,
);
console.log(
  `  simulator: --error-rate ${ERROR_RATE} (500/502/503, not applied), --reset-rate ${RESET_RATE} (connection reset, not applied), on every request; --latency ${LATENCY} ms; ${SEEDED} seeded deals`,
);
console.log(
  `  workspace config: ${JSON.stringify((b.raw.workspaces as Record<string, unknown>).acme)} (retry: default 6 attempts, 1000 ms backoff; requestTimeoutMs default 15000)`,
);
console.log(`  redis prefix ${b.prefix}; worker log ${b.logFile}`);

function passes(pagesN: number, dealsInList: number): string {
  return (pagesN / (dealsInList / 100)).toFixed(2);
}

let exitCode = 0;
const phases: Array<{ phase: string; list: Tally; clock: Tally; post: Tally; seconds: string }> = [];
let snap = proxy.snapshot();
function phaseEnd(phase: string, seconds: string): void {
  const now = proxy.snapshot();
  const d = (a: Tally, c: Tally): Tally => ({
    requests: c.requests - a.requests,
    status: Object.fromEntries(
      Object.keys(c.status)
        .map((k) => [k, (c.status[k] ?? 0) - (a.status[k] ?? 0)])
        .filter(([, v]) => v !== 0),
    ),
    noAnswer: c.noAnswer - a.noAnswer,
    clientGone: c.clientGone - a.clientGone,
    neverForwarded: c.neverForwarded - a.neverForwarded,
    firstPagesOk: c.firstPagesOk - a.firstPagesOk,
  });
  const p = {
    phase,
    list: d(snap.listDeals, now.listDeals),
    clock: d(snap.clockPage, now.clockPage),
    post: d(snap.createDeal, now.createDeal),
    seconds,
  };
  phases.push(p);
  snap = now;
  console.log(`  [${phase}] POST /v2/deals: ${fmtTally(p.post)}`);
  console.log(`  [${phase}] GET /v2/deals list pages (page_size 100): ${fmtTally(p.list)}`);
  console.log(`  [${phase}] GET /v2/deals clock pages (page_size 1): ${fmtTally(p.clock)}`);
}

try {
  for (let i = 0; i < WORKERS; i++) workers.push(spawnLoggedWorker(b, { concurrency: CONCURRENCY, lockMs: 30_000 }));
  await sleep(1500);
  const start = Date.now();
  const { run } = await importFile({
    file,
    op: 'deal.create',
    workspace: 'acme',
    queue: runtime.queue('acme'),
    store: runtime.store,
  });
  console.log(`  run ${run.id}: ${run.counts.total} rows queued`);
  const { run: first, timedOut } = await waitRun(
    runtime.store,
    run.id,
    RUN_TIMEOUT_MS,
    (r) =>
      console.log(
        `    ${secs(start)} s: ${fmtCounts(r.counts)}; list pages requested so far ${proxy.tallies.listDeals.requests}`,
      ),
    60_000,
  );
  const runSeconds = secs(start);
  console.log(
    `run ${timedOut ? 'TIMED OUT' : 'ended'} after ${runSeconds} s: ${first.status}; ${fmtCounts(first.counts)}`,
  );
  phaseEnd('run', runSeconds);
  if (timedOut) exitCode = 1;

  let after = first;
  for (const n of [1, 2]) {
    if (after.status === 'running') break;
    const problems = after.counts.failed + after.counts.uncertain + after.counts.invalid;
    if (problems === 0) break;
    await printProblems(runtime.store, run.id);
    const p = Date.now();
    const r = await runsRetry(b, run.id);
    console.log(`runs retry #${n}: exit ${r.code}: ${r.out.replace(/\n/g, ' | ')}`);
    const w = await waitRun(runtime.store, run.id, RETRY_TIMEOUT_MS);
    after = w.run;
    console.log(
      `  after retry #${n} (${secs(p)} s${w.timedOut ? ', TIMED OUT' : ''}): run ${after.status}; ${fmtCounts(after.counts)}`,
    );
    phaseEnd(`retry ${n}`, secs(p));
    if (w.timedOut) exitCode = 1;
  }

  await Promise.all(workers.map((w) => stopChild(w, 15_000)));
  const read = await readSimDeals(sim.port);
  const audit = await auditDeals(runtime.store, run.id, names, read.deals);
  const inList = read.deals.length;
  const all = proxy.tallies;
  const firstList = phases[0]!.list;
  console.log('final:');
  console.log(`  rows ${ROWS}; run ${after.status}; ${fmtCounts(after.counts)}`);
  console.log(`  results by kind: ${JSON.stringify(audit.resultKinds)}`);
  console.log(
    `  deals of the file's names: ${audit.dealsFound} for ${audit.distinctNames} distinct names; duplicates: ${audit.extraDeals} extra deals over ${audit.duplicateNames} names; rows without a deal: ${audit.rowsWithoutDeal.length}`,
  );
  console.log(
    `  succeeded rows whose record id is not a deal of their name: ${audit.wrongRecordIds.length}; succeeded without id: ${audit.succeededWithoutId.length}`,
  );
  if (audit.examples.duplicates.length)
    console.log(`  duplicate examples: ${JSON.stringify(audit.examples.duplicates)}`);
  if (audit.examples.missing.length) console.log(`  missing examples: ${JSON.stringify(audit.examples.missing)}`);
  console.log(
    `  deals in the list at the end: ${inList} (${SEEDED} seeded + created) = ${(inList / 100).toFixed(2)} pages of 100`,
  );
  console.log(`  POST /v2/deals in all: ${fmtTally(all.createDeal)}`);
  console.log(
    `  list pages, first run: ${firstList.requests} requested (${firstList.status['200'] ?? 0} answered 200) = ${passes(firstList.requests, inList)} full passes requested (${passes(firstList.status['200'] ?? 0, inList)} answered)`,
  );
  console.log(
    `  list pages in all (with retries): ${fmtTally(all.listDeals)} = ${passes(all.listDeals.requests, inList)} full passes requested (${passes(all.listDeals.status['200'] ?? 0, inList)} answered)`,
  );
  console.log(`  clock pages (page_size 1) in all: ${fmtTally(all.clockPage)}`);
  printLogSummary(b.logFile);
  console.log(`  wall time ${secs(t0)} s (first run ${phases[0]!.seconds} s)`);
  if (audit.extraDeals > 0 || audit.rowsWithoutDeal.length > 0) exitCode = 1;
} finally {
  await Promise.all(workers.map((w) => stopChild(w, 15_000)));
  await runtime.close();
  await proxy.close();
  await sim.stop();
  await dropPrefix(b.prefix);
  console.log(`  (redis prefix ${b.prefix} deleted; temp dir ${b.dir} kept for its worker log)`);
}
process.exit(exitCode);
