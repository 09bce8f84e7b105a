import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasRedisServer, startPrivateRedis, type PrivateRedis } from '../../src/runtime/index.js';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { testRedisAddress } from '../helpers/redis.js';
import { runCli } from '../helpers/run-cli.js';

/** Finding (issue 19): pointed at a Cluster node, the CLI died with `ReplyError: MOVED …` and a stack trace; it must say to name the cluster instead. */
describe.skipIf(!hasRedisServer() && !process.env.CI)('a REDIS_URL naming a Redis Cluster node', () => {
  let node: PrivateRedis;
  let h: Harness;
  beforeAll(async () => {
    node = await startPrivateRedis({ extraArgs: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'] });
    h = await startHarness({ records: 1 });
  });
  afterAll(async () => {
    await h?.close();
    await node?.stop();
  });

  it('is refused before anything is written, with a clear message and exit 2, no stack trace', async () => {
    const csvFile = h.file('deals.csv', 'id,name\nx,y\n');
    for (const args of [['runs', 'list'], ['import', csvFile, '--op', 'deal.update', '-w', 'acme'], ['worker']]) {
      const res = await runCli(['--config', h.configPath, ...args], { ...h.env, REDIS_URL: node.url }, 30_000);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stderr).toMatch(/REDIS_URL points at a node of a Redis Cluster.*REDIS_CLUSTER_NODES=host:port/s);
      expect(res.stderr).not.toMatch(/MOVED|\n\s+at /);
    }
  }, 90_000);
});

describe('REDIS_CLUSTER_NODES naming a standalone Redis', () => {
  it('is refused with the word to use REDIS_URL instead (exit 2), not "Failed to refresh slots cache"', async () => {
    const h = await startHarness({ records: 1 });
    try {
      const { host, port } = testRedisAddress();
      const res = await runCli(['--config', h.configPath, 'runs', 'list'], {
        ...h.env,
        REDIS_CLUSTER_NODES: `${host}:${port}`,
      });
      expect(res.stderr).toContain(
        `the Redis Cluster seed ${host}:${port} (REDIS_CLUSTER_NODES or redisCluster.nodes) is a standalone Redis`,
      );
      expect(res.stderr).toContain('point REDIS_URL at it instead');
      expect(res.code).toBe(2);
    } finally {
      await h.close();
    }
  });
});
