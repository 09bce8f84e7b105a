/**
 * A nightly sync over 100,000 contact rows (no ids, matched by email) with 1% changed:
 * requests sent should equal changed rows + list pages. Wall time from tick to run end.
 * Run: npx tsx bench/reconcile-sync.ts [records] [changed%]
 * Redis DB 6 (REDIS_URL to override), under a unique prefix that is removed at the end.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configFromObject } from '../src/config/index.js';
import { silentLogger } from '../src/log/index.js';
import { deleteKeysWithPrefix, openRuntime } from '../src/runtime/index.js';
import { loadDefinitionFile, runSync } from '../src/schedule/index.js';
import { startSimulator } from '../src/sim/index.js';
import { startWorkerPool } from '../src/worker/index.js';

const records = Number(process.argv[2] ?? 100_000);
const changedPct = Number(process.argv[3] ?? 1);
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/6';
const prefix = `bench-reconcile-${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'crm-sync-bench-'));

const sim = await startSimulator({
  port: 0,
  workspaces: [{ name: 'acme', apiKeys: ['bench'], records, seed: 7, rateLimit: null }],
});
const ws = sim.workspace('acme');
const every = Math.round(100 / changedPct);
let changed = 0;
const lines = ['name,email,phone_number'];
[...ws.contacts.values()].forEach((c, i) => {
  const phone = i % every === 0 ? `+1 999-555-${String(i % 10_000).padStart(4, '0')}` : c.phone_number;
  if (phone !== c.phone_number) changed++;
  lines.push([c.name, c.email, phone].map((v) => `"${v.replaceAll('"', '""')}"`).join(','));
});
writeFileSync(join(dir, 'contacts.csv'), lines.join('\n') + '\n');
writeFileSync(
  join(dir, 'nightly.json'),
  JSON.stringify({
    name: 'bench-nightly',
    workspace: 'acme',
    operation: 'contact.update',
    source: 'contacts.csv',
    matchKey: 'email',
    schedule: { cron: '0 2 * * *' },
  }),
);
process.env.BENCH_KEY = 'bench';
const config = configFromObject(
  {
    redisUrl,
    resultsDir: join(dir, 'results'),
    workspaces: { acme: { baseUrl: sim.baseUrl('acme'), apiKeyEnv: 'BENCH_KEY' } },
  },
  { source: 'bench', env: { ...process.env, CRM_SYNC_PREFIX: prefix, REDIS_URL: redisUrl }, baseDir: dir },
);
const runtime = await openRuntime(config, silentLogger);
const pool = await startWorkerPool({ config, logger: silentLogger, concurrency: 16 });
try {
  ws.resetStats();
  const started = performance.now();
  const summary = await runSync(loadDefinitionFile(join(dir, 'nightly.json')), { runtime, pollMs: 100 });
  const ms = performance.now() - started;
  const s = ws.stats;
  const sentWrites = s.writes.contactUpdate;
  process.stdout.write(
    [
      `nightly sync: ${records} rows, ${changed} changed (${changedPct}%), run ${summary.status}`,
      `  counts: ${JSON.stringify(summary.counts)}`,
      `  requests ${s.requests} = writes ${sentWrites} + list pages ${s.listPages} (expected ${changed} + ${Math.ceil(records / 100) + 1})`,
      `  wall time ${(ms / 1000).toFixed(2)} s`,
    ].join('\n') + '\n',
  );
  if (s.requests !== changed + s.listPages || sentWrites !== changed) process.exitCode = 1;
} finally {
  await pool.close();
  await runtime
    .queue('acme')
    .obliterate({ force: true })
    .catch(() => undefined);
  await deleteKeysWithPrefix(runtime.redis, prefix);
  await runtime.close();
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
}
