/** What the fleet benchmarks share: many workspaces on one simulator, short deal-update runs. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { importFile } from '../src/lifecycle/index.js';
import type { RunRecord } from '../src/runs/index.js';
import type { Runtime } from '../src/runtime/index.js';
import type { BenchEnv, SimProcess } from './bench-lib.js';
import { dealIds } from './ids.js';

/** `w0000`, `w0001`, …: the benchmark's workspace names. */
export function workspaceNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `w${String(i).padStart(4, '0')}`);
}

/** A config file's workspaces on the simulator, each with the same known limit. */
export function fleetWorkspaces(
  sim: SimProcess,
  list: string[],
  limit: { max: number; durationMs: number },
): { workspaces: Record<string, { baseUrl: string; apiKeyEnv: string; rateLimit: typeof limit }> } {
  return {
    workspaces: Object.fromEntries(
      list.map((n) => [n, { baseUrl: sim.baseUrlOf(n), apiKeyEnv: 'BENCH_KEY', rateLimit: limit }]),
    ),
  };
}

/** Deal ids by simulator and workspace, read before a measured phase: listing spends the simulator's limit too. */
const knownIds = new Map<string, string[]>();

export async function prefetchIds(sim: SimProcess, workspaces: string[]): Promise<void> {
  for (let i = 0; i < workspaces.length; i += 20)
    await Promise.all(
      workspaces.slice(i, i + 20).map(async (ws) => knownIds.set(`${sim.port}/${ws}`, await dealIds(sim, ws))),
    );
  await sleep(2000); // the simulator's buckets fill again
}

/** Queues `rows` deal updates of workspace `ws` through the library (10 rows a job). */
export async function queueRows(
  rt: Runtime,
  env: BenchEnv,
  sim: SimProcess,
  ws: string,
  rows: number,
): Promise<RunRecord> {
  const ids = knownIds.get(`${sim.port}/${ws}`) ?? (await dealIds(sim, ws));
  const file = join(env.dir, `${ws}.csv`);
  writeFileSync(
    file,
    `id,name\n${ids
      .slice(0, rows)
      .map((id, i) => `${id},Fleet ${i}`)
      .join('\n')}\n`,
  );
  const { run } = await importFile({
    file,
    op: 'deal.update',
    workspace: ws,
    queue: rt.queue(ws),
    store: rt.store,
    rowsPerJob: 10,
  });
  return run;
}

export async function waitAll(rt: Runtime, ids: string[]): Promise<RunRecord[]> {
  for (;;) {
    const runs = await Promise.all(ids.map((id) => rt.store.requireRun(id)));
    if (runs.every((r) => r.status !== 'running')) return runs;
    await sleep(200);
  }
}
