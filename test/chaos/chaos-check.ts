import type { ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect } from 'vitest';
import type { RowResult, RunRecord } from '../../src/runs/index.js';
import { resultsByRow, startHarness, type Harness, type HarnessOptions } from '../helpers/pipeline.js';
import { startCli } from '../helpers/run-cli.js';

/**
 * The chaos suite's common ground (docs/development.md, "Chaos suite"). CI runs every scenario in a bounded
 * form; `CHAOS_SCALE=10 npx vitest run test/chaos` runs them ten times larger and longer.
 */
export const SCALE = Math.max(1, Number(process.env.CHAOS_SCALE ?? 1));

/**
 * One harness per test and the worker processes it spawned, all stopped after the test (faults
 * cleared first, so closing is not itself a fault scenario).
 */
export function chaosFixture(): { children: ChildProcess[]; start(options: HarnessOptions): Promise<Harness> } {
  const children: ChildProcess[] = [];
  let h: Harness | undefined;
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    h?.ws.setFaults(null);
    await h?.close();
    h = undefined;
  });
  return {
    children,
    async start(options) {
      h = await startHarness(options);
      return h;
    },
  };
}

/** A `crm-sync worker` child process, as an operator starts one (short job lock: kills are found fast). */
/** What each spawned worker wrote to stderr so far: said when one is found ended on its own. */
const stderrOf = new WeakMap<ChildProcess, () => string>();

export function spawnWorker(h: Harness, children: ChildProcess[], lockMs = 2000): ChildProcess {
  const cli = startCli(
    [
      '--config',
      h.configPath,
      '--log-level',
      process.env.CHAOS_LOG_LEVEL ?? 'error',
      'worker',
      '--concurrency',
      '8',
      '--lock-ms',
      String(lockMs),
    ],
    h.env,
  );
  const { child } = cli;
  stderrOf.set(child, () => cli.stderr);
  if (process.env.CHAOS_LOG_FILE) child.stderr?.pipe(createWriteStream(process.env.CHAOS_LOG_FILE, { flags: 'a' }));
  children.push(child);
  return child;
}

/**
 * Keeps `count` worker processes running and kills one with SIGKILL every `minMs`–`maxMs` for
 * `forMs`, or until the run ended; then leaves `count` running. Returns the kills made while the
 * run was still going.
 */
export async function killLoop(
  h: Harness,
  children: ChildProcess[],
  runId: string,
  o: { count: number; forMs: number; minMs: number; maxMs: number },
): Promise<number> {
  const live = Array.from({ length: o.count }, () => spawnWorker(h, children));
  const until = Date.now() + o.forMs;
  let kills = 0;
  while (Date.now() < until) {
    await sleep(o.minMs + Math.random() * (o.maxMs - o.minMs));
    if ((await h.runtime.store.requireRun(runId)).status !== 'running') break;
    const at = Math.floor(Math.random() * live.length);
    const victim = live[at]!;
    if (victim.exitCode !== null || victim.signalCode !== null) {
      // Its 'exit' has come and gone: waiting for it would wait for good (a CI run once did, 240 s).
      const said = (stderrOf.get(victim)?.() ?? '').trim().split('\n').slice(-5).join(' | ');
      console.log(`[chaos] a worker had ended on its own (${victim.exitCode ?? victim.signalCode}): ${said}`);
    } else {
      const exited = new Promise((resolve) => victim.once('exit', resolve));
      victim.kill('SIGKILL');
      await exited;
      kills++;
    }
    live[at] = spawnWorker(h, children);
  }
  return kills;
}

export interface ChaosFigures {
  scenario: string;
  rowsIn: number;
  /** Writes the simulator applied (its own count, faults included). */
  applied: number;
  /** Deals the simulator holds twice for one row; absent where the CRM cannot hold two (members are keyed by address). */
  duplicates?: number;
}

/**
 * The suite's verdict on a run: prints rows in, results by kind, rows applied at the simulator,
 * duplicates and whether the run is stuck; asserts exactly one result per row, no duplicates
 * and a run that ended. Returns the results for the scenario's own check of the simulator state.
 */
export async function checkChaos(h: Harness, run: RunRecord, f: ChaosFigures): Promise<RowResult[]> {
  const results = await resultsByRow(h, run.id);
  const byKind: Record<string, number> = {};
  for (const r of results) byKind[r.status] = (byKind[r.status] ?? 0) + 1;
  const stuck = run.status === 'running' || run.status === 'blocked' ? 1 : 0;
  console.log(
    `[chaos] ${f.scenario}: rows in ${f.rowsIn}; results ${JSON.stringify(byKind)} (${results.length}); ` +
      `applied at the simulator ${f.applied}; duplicates ${f.duplicates ?? 'n/a'}; stuck runs ${stuck} (run ${run.status})`,
  );
  expect(results.map((r) => r.row)).toEqual(Array.from({ length: f.rowsIn }, (_, i) => i + 1));
  expect(run.counts.total).toBe(f.rowsIn);
  expect(run.counts.queued).toBe(0);
  if (f.duplicates !== undefined) expect(f.duplicates).toBe(0);
  expect(stuck).toBe(0);
  return results;
}

/** Deals whose name appears more than once (creates made twice). */
export function duplicateDealNames(h: Harness, prefix: string): number {
  const seen = new Map<string, number>();
  for (const d of h.ws.deals.values()) if (d.name.startsWith(prefix)) seen.set(d.name, (seen.get(d.name) ?? 0) + 1);
  let extra = 0;
  for (const n of seen.values()) extra += n - 1;
  return extra;
}

/**
 * What creates under faults must leave: every row succeeded on a deal of its own (no id shared)
 * or is uncertain naming exactly its own deal — a lost answer whose deal was stamped too close
 * to its send to tell from a person's made just before (the simulator stamps within a few ms of
 * the send). `nameOf` is the deal name a row creates. Returns how many rows are uncertain.
 */
export function expectOwnDealsOnly(h: Harness, results: RowResult[], nameOf: (row: number) => string): number {
  expect(results.filter((r) => r.status !== 'succeeded' && r.status !== 'uncertain')).toEqual([]);
  const uncertain = results.filter((r) => r.status === 'uncertain');
  for (const r of uncertain) {
    const named = [...h.ws.deals.values()].filter((d) => r.message?.includes(d.id));
    expect(named.map((d) => d.name)).toEqual([nameOf(r.row)]);
  }
  const recorded = results.filter((r) => r.status === 'succeeded');
  expect(new Set(recorded.map((r) => r.recordId)).size).toBe(recorded.length);
  for (const r of recorded) expect(h.ws.deals.get(r.recordId!)?.name).toBe(nameOf(r.row));
  return uncertain.length;
}

/** Every row 1..total has exactly one result, and all of them succeeded. */
export async function expectEveryRowOnce(harness: Harness, runId: string, total: number) {
  const results = await resultsByRow(harness, runId);
  expect(results.map((r) => r.row)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  expect(results.every((r) => r.status === 'succeeded')).toBe(true);
}
