import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { generationKey } from '../../src/keys/index.js';
import { connectRedis, watchRedisGeneration } from '../../src/redis/index.js';
import { hasRedisServer, startPrivateRedis } from '../../src/runtime/index.js';
import { captureLogger } from '../helpers/log-capture.js';

describe('Redis that lost its data', () => {
  it.skipIf(!hasRedisServer() && !process.env.CI)(
    'is said loudly after a restart without persistence, and not after one that kept its data',
    async () => {
      const { logger, lines } = captureLogger('info');
      const persistent = await startPrivateRedis({ appendOnly: true });
      const redis = await connectRedis(persistent.url, { role: 'worker', liveness: false });
      try {
        const watch = await watchRedisGeneration(redis, 'gen-test', logger);
        const first = watch.current;
        expect(await redis.get(generationKey('gen-test'))).toBe(first);
        // A restart that kept its data (AOF): nothing to say.
        await persistent.kill(true);
        await persistent.restart();
        await waitFor(() => redis.status === 'ready');
        await redis.ping();
        await sleep(300);
        expect(lines.filter((l) => l.level === 50)).toEqual([]);
        // The data is gone (as after a restart without persistence): one error, and a new generation.
        await redis.flushall();
        await persistent.kill(true);
        await persistent.restart();
        await waitFor(() => lines.some((l) => l.level === 50));
        const errors = lines.filter((l) => l.level === 50);
        expect(errors).toHaveLength(1);
        expect(errors[0]?.msg).toMatch(/Redis lost its data .*runs begun since .*appendonly yes/);
        expect(watch.current).not.toBe(first);
        watch.stop();
      } finally {
        redis.disconnect();
        await persistent.stop();
      }
    },
    30_000,
  );
});

async function waitFor(ok: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await sleep(50);
  }
}
