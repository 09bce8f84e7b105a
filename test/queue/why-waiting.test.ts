import { afterAll, describe, expect, it } from 'vitest';
import { PoolPresence, whyRowsWait } from '../../src/queue/index.js';
import { RunStore } from '../../src/runs/index.js';
import { testRedis } from '../runs/redis-fixture.js';

/** The one reader of "why are this workspace's rows waiting", which the CLI and the dashboard word. */
const { redis, prefix, cleanup } = testRedis();
const store = new RunStore({ redis, prefix });
afterAll(cleanup);

describe('whyRowsWait', () => {
  it('names every hold, and no worker, in one answer; nothing once they are lifted and a worker serves', async () => {
    expect(await whyRowsWait(store, 'w1')).toEqual([{ kind: 'no-worker' }]);
    await store.setHold('w1', 'paused', 'night freeze');
    await store.setHold('w1', 'unreachable', 'the CRM does not answer (5 failures)');
    await store.setHold('w1', 'blocked', 'the CRM refused the API key (401)');
    expect(await whyRowsWait(store, 'w1')).toEqual([
      { kind: 'blocked', reason: 'the CRM refused the API key (401)' },
      { kind: 'paused', reason: expect.stringContaining('night freeze') },
      { kind: 'unreachable', reason: 'the CRM does not answer (5 failures)' },
      { kind: 'no-worker' },
    ]);
    for (const kind of ['paused', 'unreachable', 'blocked'] as const) await store.liftHold('w1', kind);
    const presence = new PoolPresence({ redis, prefix, workspaces: ['w1'] });
    await presence.start();
    try {
      expect(await whyRowsWait(store, 'w1')).toEqual([]);
    } finally {
      await presence.stop();
    }
  });
});
