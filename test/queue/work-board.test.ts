import { QueueKeys } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { bullPrefix } from '../../src/keys/index.js';
import { queueName } from '../../src/queue/queue-names.js';
import { WorkBoard } from '../../src/queue/work-board.js';
import { deleteKeysWithPrefix } from '../../src/runtime/index.js';
import { TEST_REDIS_URL, testPrefix } from '../helpers/redis.js';

const redis = new Redis(TEST_REDIS_URL, { lazyConnect: false });

afterAll(async () => {
  await redis.quit();
});

/** A board of its own prefix, removed when the test ends. */
async function withBoard(test: (board: WorkBoard, prefix: string) => Promise<void>): Promise<void> {
  const prefix = testPrefix('work-board');
  try {
    await test(new WorkBoard({ redis, prefix }), prefix);
  } finally {
    await deleteKeysWithPrefix(redis, prefix);
  }
}

describe('WorkBoard (settle-work)', () => {
  it('lists a signalled workspace with its signal count', () =>
    withBoard(async (board) => {
      await board.signal('acme');
      await board.signal('acme');
      await board.signal('globex');
      expect(await board.listed()).toEqual(
        new Map([
          ['acme', '2'],
          ['globex', '1'],
        ]),
      );
    }));

  it('settles a workspace only if no one signalled since its count was read', () =>
    withBoard(async (board) => {
      await board.signal('acme');
      const seen = (await board.listed()).get('acme')!;
      // A producer adds jobs and signals between the read and the settle: the settle fails.
      await board.signal('acme');
      expect(await board.settle('acme', seen)).toBe(false);
      expect((await board.listed()).get('acme')).toBe('2');
      expect(await board.settle('acme', '2')).toBe(true);
      expect((await board.listed()).has('acme')).toBe(false);
      // Settling a workspace that is not listed changes nothing.
      expect(await board.settle('acme', '2')).toBe(false);
    }));

  it('sweeps back the workspaces whose queues hold jobs no one signalled, one process at a time', () =>
    withBoard(async (board, prefix) => {
      const keys = new QueueKeys(bullPrefix(prefix)).getKeys(queueName('acme'));
      await redis.rpush(keys.wait!, 'job-1');
      expect(await board.sweep(['acme', 'globex'], 10_000)).toEqual(['acme']);
      expect(await board.listed()).toEqual(new Map([['acme', '1']]));
      // Another process of the fleet within the lock's time finds it taken.
      expect(await board.sweep(['acme', 'globex'], 10_000)).toBeNull();
    }));
});
