/**
 * Reconcile index over 100,000 contacts: pages/s, total time, index memory (bytes/record).
 * Run: node --expose-gc --import tsx bench/reconcile-index.ts [records] [rate max/windowMs]
 * The simulator runs in this process so its counters can be read; its records exist before
 * the baseline, so the heap growth measured is the index alone.
 */
import { Secret } from '../src/config/index.js';
import { CrmClient } from '../src/crm/index.js';
import { RecordIndex } from '../src/reconcile/index.js';
import { startSimulator } from '../src/sim/index.js';

const records = Number(process.argv[2] ?? 100_000);
const rate = process.argv[3]?.split('/').map(Number);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc --import tsx');

const sim = await startSimulator({
  port: 0,
  workspaces: [
    {
      name: 'acme',
      apiKeys: ['bench'],
      records,
      seed: 7,
      rateLimit: rate ? { max: rate[0]!, windowMs: rate[1]! } : null,
    },
  ],
});
const client = new CrmClient({ workspace: 'acme', baseUrl: sim.baseUrl('acme'), apiKey: new Secret('bench') });
await client.listPage('contacts', { pageNumber: 1, pageSize: 100 }); // warm the simulator's list cache and the socket
sim.workspace('acme').resetStats();
gc();
const before = process.memoryUsage().heapUsed;
const started = performance.now();
const index = await RecordIndex.build(client, { resource: 'contacts', matchKey: 'email', pageSize: 100 });
const ms = performance.now() - started;
gc();
const bytes = process.memoryUsage().heapUsed - before;
const stats = sim.workspace('acme').stats;
process.stdout.write(
  [
    `reconcile index: ${index.size} contacts, page size 100, rate ${rate ? `${rate[0]}/${rate[1]} ms` : 'unlimited'}`,
    `  list requests ${stats.listPages} (incl. the empty last page), 429s ${stats.rateLimited}`,
    `  total ${(ms / 1000).toFixed(2)} s, ${((index.pages / ms) * 1000).toFixed(0)} pages/s, ${((index.size / ms) * 1000).toFixed(0)} records/s`,
    `  index heap ${(bytes / 1024 / 1024).toFixed(1)} MiB = ${(bytes / index.size).toFixed(0)} bytes/record`,
  ].join('\n') + '\n',
);
// Keep the index alive until measured.
if (index.lookup('nobody@example.invalid').length !== 0) throw new Error('unexpected match');
client.close();
await sim.close();
