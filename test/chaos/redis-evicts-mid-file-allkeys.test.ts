import { describe, it } from 'vitest';
import { hasRedisServer } from '../../src/runtime/index.js';
import { EVICT_MID_FILE, evictWhileReading, redisLossFixture } from './redis-loss-fixture.js';

// One policy per file (the other is redis-evicts-mid-file-volatile.test.ts): the two run side by side.
const f = redisLossFixture();

describe.skipIf(!hasRedisServer() && !process.env.CI)('Redis evicting while the file is still read', () => {
  it(`allkeys-lru: ${EVICT_MID_FILE}`, () => evictWhileReading(f, 'allkeys-lru', false), 240_000);
});
