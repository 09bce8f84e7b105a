/**
 * Names instead of ids (issue 44): the same deal updates decoded with four reference columns by
 * name (Pipeline, Stage, Tags by name, Owner through a lookup file) and with ids, each variant in
 * a process of its own (its peak RSS is its own). Prints rows/s, peak RSS, the CRM requests the
 * names cost (one pass over the deal list: pages of the workspace, not rows of the file) and the
 * bytes Redis keeps for the reference index.
 *   npx tsx bench/references.ts [rows=100000] [deals in the workspace=10000]
 * The simulator runs in this process (its request counter is read here); Redis at REDIS_URL.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { Redis } from 'ioredis';
import { configFromObject } from '../src/config/index.js';
import { ingest, readMappingFile } from '../src/ingest/index.js';
import { silentLogger } from '../src/log/index.js';
import { referenceStoreOf, workspaceReferenceLoader } from '../src/references/index.js';
import { startSimulator } from '../src/sim/index.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

if (process.argv[2] === '--child') {
  // One variant: decode every row (references read first, as an import does), then report.
  const [, , , variant, dir, baseUrl, prefix] = process.argv as string[];
  process.env.BENCH_KEY = 'bench';
  const config = configFromObject(
    { redisUrl: REDIS_URL, workspaces: { acme: { baseUrl: baseUrl!, apiKeyEnv: 'BENCH_KEY' } } },
    { source: null, env: { ...process.env, CRM_SYNC_PREFIX: prefix! }, baseDir: dir! },
  );
  const redis = new Redis(REDIS_URL);
  const load = workspaceReferenceLoader({ config, workspace: 'acme', redis, logger: silentLogger });
  let refsMs = 0;
  const started = performance.now();
  const { rows } = await ingest(join(dir!, `${variant}.csv`), {
    op: 'deal.update',
    ...(variant === 'names' ? { mapping: readMappingFile(join(dir!, 'mapping.json')).mapping } : {}),
    loadReferences: async (lists) => {
      const t = performance.now();
      const index = await load(lists);
      refsMs = performance.now() - t;
      return index;
    },
  });
  let payloads = 0;
  let invalid = 0;
  for await (const row of rows) {
    if (row.payload !== undefined) payloads++;
    else invalid++;
  }
  const ms = performance.now() - started;
  const bytes = await referenceStoreOf(config, 'acme', redis).bytes(['deals', 'contacts', 'leads']);
  redis.disconnect();
  process.stdout.write(
    JSON.stringify({ ms, refsMs, payloads, invalid, rssMb: process.resourceUsage().maxRSS / 1024, bytes }) + '\n',
  );
  process.exit(0);
}

const ROWS = Number(process.argv[2] ?? 100_000);
const DEALS = Number(process.argv[3] ?? 10_000);
const dir = mkdtempSync(join(tmpdir(), 'crm-sync-refs-bench-'));
const sim = await startSimulator({ port: 0, workspaces: [{ name: 'acme', apiKeys: ['bench'], records: DEALS }] });
const ws = sim.workspace('acme');
const deals = [...ws.deals.values()];
const pipelineName = new Map(ws.pipelines.map((p) => [p.id, p.name]));

async function write(name: string, header: string, line: (i: number) => string): Promise<void> {
  const out = createWriteStream(join(dir, name));
  out.write(header);
  for (let i = 0; i < ROWS; i++) if (!out.write(line(i))) await new Promise<void>((r) => out.once('drain', () => r()));
  out.end();
  await finished(out);
}
const pick = (i: number) => {
  const stage = ws.stages[i % ws.stages.length]!;
  return {
    deal: deals[i % deals.length]!,
    stage,
    tags: [ws.tags[i % ws.tags.length]!, ws.tags[(i + 5) % ws.tags.length]!],
    owner: ws.owners[i % ws.owners.length]!,
  };
};
await write('names.csv', 'id,name,Pipeline,Stage,Tags,Owner\n', (i) => {
  const p = pick(i);
  return `${p.deal.id},Deal ${i},${pipelineName.get(p.stage.pipelineId)},${p.stage.name},${p.tags.map((t) => t.name).join(';')},${p.owner.email}\n`;
});
await write('ids.csv', 'id,name,pipeline_id,stage_id,tag_ids,owner_id\n', (i) => {
  const p = pick(i);
  return `${p.deal.id},Deal ${i},${p.stage.pipelineId},${p.stage.id},${p.tags.map((t) => t.id).join(';')},${p.owner.id}\n`;
});
writeFileSync(join(dir, 'owners.csv'), `email,id\n${ws.owners.map((o) => `${o.email},${o.id}`).join('\n')}\n`);
writeFileSync(
  join(dir, 'mapping.json'),
  JSON.stringify({
    columns: {
      Pipeline: { field: 'pipeline_id', by: 'name' },
      Stage: { field: 'stage_id', by: 'name' },
      Tags: { field: 'tag_ids', by: 'name' },
      Owner: { field: 'owner_id', lookup: { file: 'owners.csv', key: 'email', value: 'id' } },
    },
  }),
);

const lines = [
  `references: ${ROWS.toLocaleString('en-US')} deal updates, a workspace of ${DEALS.toLocaleString('en-US')} deals`,
];
for (const variant of ['ids', 'names'] as const) {
  const prefix = `crm-sync-bench-refs-${process.pid}-${variant}`;
  const before = ws.stats.requests;
  // Not spawnSync: the simulator answering the child runs on this process's event loop.
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', new URL(import.meta.url).pathname, '--child', variant, dir, sim.baseUrl('acme'), prefix],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const status = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (status !== 0) throw new Error(`${variant}: ${stderr}`);
  const r = JSON.parse(stdout.trim().split('\n').pop()!) as {
    ms: number;
    refsMs: number;
    payloads: number;
    invalid: number;
    rssMb: number;
    bytes: number;
  };
  const requests = ws.stats.requests - before;
  lines.push(
    `  ${variant.padEnd(5)}: ${Math.round((ROWS / r.ms) * 1000).toLocaleString('en-US')} rows/s (${(r.ms / 1000).toFixed(1)} s, of which reading references ${(r.refsMs / 1000).toFixed(1)} s; ${r.payloads} payloads, ${r.invalid} invalid), peak RSS ${r.rssMb.toFixed(0)} MB, ` +
      `CRM requests ${requests} (${((requests / ROWS) * 100).toFixed(2)} % of the rows), Redis ${r.bytes.toLocaleString('en-US')} bytes of references`,
  );
  const redis = new Redis(REDIS_URL);
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
}
process.stdout.write(`${lines.join('\n')}\n`);
await sim.close();
rmSync(dir, { recursive: true, force: true });
