import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasRedisServer, startPrivateRedis, type PrivateRedis } from '../../src/runtime/index.js';
import { startWorkerPool } from '../../src/worker/index.js';
import { captureLogger } from '../helpers/log-capture.js';
import { resultsByRow, startHarness, type Harness, dealValuesFile } from '../helpers/pipeline.js';

/*
 * Redis at maxmemory (noeviction) refuses writes. No row may be sent while its result cannot be
 * stored, and the workers must stop, not cycle jobs through failures; once Redis has room the
 * run finishes with one result per row.
 */
describe.skipIf(!hasRedisServer() && !process.env.CI)('Redis full', () => {
  let redis: PrivateRedis;
  let h: Harness;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url);
    h = await startHarness({ records: 400, seed: 21, latencyMs: 20, redisUrl: redis.url });
  });
  afterAll(async () => {
    await h?.close();
    admin?.disconnect();
    await redis?.stop();
  });

  it('is a stop, not a storm: workers pause saying why, send nothing meanwhile, and finish once Redis has room', async () => {
    const { logger, lines } = captureLogger('info');
    const pool = await startWorkerPool({ config: h.config, logger, concurrency: 4, closeTimeoutMs: 2000 });
    try {
      const deals = [...h.ws.deals.values()];
      const file = dealValuesFile(h, 'full.csv', 7000, deals);
      const run = await h.importFile(file, 'deal.update');
      await h.waitForRun(run.id, 20_000, (r) => r.counts.succeeded >= 40);
      // Full: nothing that needs memory can be written any more.
      const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1]);
      await admin.config('SET', 'maxmemory', String(Math.max(1024 * 1024, used - 64 * 1024)));
      await sleep(3000);
      const writesAfterStop = h.ws.stats.writes.dealUpdate;
      await sleep(3000);
      const writesLater = h.ws.stats.writes.dealUpdate;
      const paused = lines.some((l) => l.level === 50 && /Redis is full/.test(l.msg));
      await admin.config('SET', 'maxmemory', '0');
      const done = await h.waitForRun(run.id, 60_000);
      const results = await resultsByRow(h, run.id);
      console.log(
        `[redis-full] writes while full: ${writesLater - writesAfterStop} in 3 s; run ${done.status} ${JSON.stringify(done.counts)}; CRM writes ${h.ws.stats.writes.dealUpdate} for 400 rows`,
      );
      expect(paused).toBe(true);
      expect(writesLater - writesAfterStop).toBe(0);
      expect(done.counts).toMatchObject({ total: 400, succeeded: 400, queued: 0 });
      expect(results.map((r) => r.row)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
      expect(lines.some((l) => /Redis has room again/.test(l.msg))).toBe(true);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
      await pool.close();
    }
  }, 90_000);
});
