/**
 * What the CRM client costs per request over the bare got loop of bench/throughput.ts: the
 * same PATCHes to the same simulator process, alternating rounds, CPU of this process per
 * request (process.cpuUsage). Separates the client's share of the pipeline's CPU from the
 * worker's own bookkeeping.
 *
 *   npx tsx bench/client-cost.ts [requests=10000] [concurrency=16] [rounds=3]
 */
import { CrmClient } from '../src/crm/index.js';
import { Secret } from '../src/config/index.js';
import { bareGot, fmt, startSimProcess, stopProcesses } from './bench-lib.js';
import { dealIds } from './ids.js';

const N = Number(process.argv[2] ?? 10_000);
const CONCURRENCY = Number(process.argv[3] ?? 16);
const ROUNDS = Number(process.argv[4] ?? 3);

const sim = await startSimProcess({ records: 2000 });
const ids = await dealIds(sim);
const idOf = (i: number) => ids[i % ids.length]!;

const bare = bareGot(sim, CONCURRENCY);
const { http } = bare;
const client = new CrmClient({
  workspace: 'acme',
  baseUrl: sim.baseUrl,
  apiKey: new Secret(sim.apiKey),
  maxSockets: CONCURRENCY,
});

async function loop(send: (i: number) => Promise<unknown>): Promise<{ perSec: number; cpuMs: number }> {
  let next = 0;
  const cpu = process.cpuUsage();
  const started = Date.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < N) await send(next++);
    }),
  );
  const used = process.cpuUsage(cpu);
  return { perSec: N / ((Date.now() - started) / 1000), cpuMs: (used.user + used.system) / 1000 / N };
}

const sides: Record<string, (i: number) => Promise<unknown>> = {
  'bare got': (i) => http.patch(`v2/deals/${idOf(i)}`, { json: { deal: { name: `Bare ${i}` } } }).json(),
  'CrmClient.update': (i) => client.update({ op: 'deal.update', id: idOf(i), fields: { name: `Client ${i}` } }),
  'CrmClient.update + signal': (i) =>
    client.update(
      { op: 'deal.update', id: idOf(i), fields: { name: `Signal ${i}` } },
      { signal: new AbortController().signal },
    ),
};
for (const send of Object.values(sides)) await loop(send); // warm-up
for (let r = 1; r <= ROUNDS; r++)
  for (const [name, send] of Object.entries(sides)) {
    const { perSec, cpuMs } = await loop(send);
    console.log(`round ${r}: ${name.padEnd(26)} ${fmt(perSec, 0)} req/s, ${fmt(cpuMs, 3)} ms CPU per request`);
  }
bare.close();
await stopProcesses([sim.child]);
