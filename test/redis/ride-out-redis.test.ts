import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log/index.js';
import { isRedisUnavailable, rideOutRedis } from '../../src/redis/index.js';

/** ioredis's AbortError, as a pipeline's command gets it when its connection closes half-answered. */
function aborted(): Error {
  return Object.assign(new Error('Command aborted due to connection close'), { name: 'AbortError' });
}

describe('a producer step riding out Redis', () => {
  it('a pipeline aborted by a closing connection is waited out and the step repeated, like a closed connection', async () => {
    expect(isRedisUnavailable(aborted())).toBe(true);
    expect(isRedisUnavailable(new Error('Connection is closed.'))).toBe(true);
    let calls = 0;
    const value = await rideOutRedis(
      async () => {
        calls++;
        if (calls < 3) throw aborted();
        return 'queued';
      },
      { logger: silentLogger, outageMs: 10_000, giveUp: () => new Error('gave up') },
    );
    expect({ value, calls }).toEqual({ value: 'queued', calls: 3 });
  });

  it('any other error ends the step at once', async () => {
    let calls = 0;
    const step = rideOutRedis(
      async () => {
        calls++;
        throw new Error('ERR wrong number of arguments');
      },
      { logger: silentLogger, outageMs: 10_000, giveUp: () => new Error('gave up') },
    );
    await expect(step).rejects.toThrow('ERR wrong number of arguments');
    expect(calls).toBe(1);
  });
});
