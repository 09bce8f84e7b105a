/**
 * How long the one-time move to the hash-tagged key layout takes (src/runtime/migrate-layout.ts):
 * RUNS runs of version 1 (each a record, ROWS results in their buckets, a problems set, its
 * status and workspace index entries) over 20 workspaces, with 100 write-order keys and a queue's
 * worth of BullMQ keys a workspace, on a private redis-server; then migrateLayout, timed.
 *
 *   npx tsx bench/layout-migration.ts [runs=20000] [rows=250]
 */
import { Redis } from 'ioredis';
import { migrateLayout } from '../src/runtime/migrate-layout.js';
import { fmt, startPrivateRedis } from './bench-lib.js';

const RUNS = Number(process.argv[2] ?? 20_000);
const ROWS = Number(process.argv[3] ?? 250);
const P = 'crm-sync';
const server = await startPrivateRedis();
const redis = new Redis(server.url);
const workspaces = Array.from({ length: 20 }, (_, i) => `ws${i}`);

for (let i = 0; i < RUNS; i += 500) {
  const pipe = redis.pipeline();
  for (let n = i; n < Math.min(RUNS, i + 500); n++) {
    const id = `20261101-000000-000-${n.toString(36).padStart(8, '0')}`;
    const ws = workspaces[n % workspaces.length]!;
    const created = Date.parse('2026-11-01T00:00:00Z') + n;
    pipe.hset(`${P}:run:${id}`, { id, workspace: ws, status: 'completed', createdMs: created, maxRow: ROWS });
    for (let b = 0; b <= Math.floor(ROWS / 100); b++) {
      const fields: Record<string, string> = {};
      for (let row = Math.max(1, b * 100); row < Math.min(ROWS + 1, b * 100 + 100); row++)
        fields[row] = `s{"l":${row + 1},"t":1}`;
      pipe.hset(`${P}:run:${id}:results:${b}`, fields);
    }
    pipe.zadd(`${P}:run:${id}:problems`, 1, '1');
    pipe.zadd(`${P}:runs`, created, id);
    pipe.zadd(`${P}:runs:status:completed`, created, id);
    pipe.zadd(`${P}:workspace:${ws}:runs`, created, id);
  }
  await pipe.exec();
}
const pipe = redis.pipeline();
for (const ws of workspaces) {
  for (let r = 0; r < 100; r++) pipe.set(`${P}:ws:${ws}:order:deals:d${r}`, 'x');
  for (const k of ['meta', 'wait', 'completed', 'events', 'id']) pipe.set(`${P}:q:${ws}:${k}`, '1');
}
pipe.set(`${P}:generation`, 'g@1');
await pipe.exec();
const keysBefore = await redis.dbsize();
const memory = Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0) / 1024 / 1024;

const started = Date.now();
const report = await migrateLayout(redis, P);
const ms = Date.now() - started;
console.log(
  `layout migration: ${RUNS} runs of ${ROWS} rows (${keysBefore} keys, ${fmt(memory, 0)} MB) moved in ${fmt(ms / 1000, 2)} s ` +
    `(${fmt((RUNS / ms) * 1000, 0)} runs/s; ${report?.keys ?? 0} keys renamed); keys after ${await redis.dbsize()}`,
);
redis.disconnect();
await server.stop();
