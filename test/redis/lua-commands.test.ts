import { readdirSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { LuaScript } from '../../src/redis/lua-script.js';
import { FINISH_CREATE } from '../../src/runs/fence-scripts.js';
import { RECORD_RESULTS, REQUEUE_ROWS } from '../../src/runs/run-scripts.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';

const dir = new URL('../../src/redis/commands/', import.meta.url);
const commands = readdirSync(dir)
  .filter((f) => f.endsWith('.lua'))
  .map((f) => f.slice(0, -'.lua'.length));
const redis = new Redis(TEST_REDIS_URL, { lazyConnect: false });

afterAll(() => redis.quit());

describe('the Lua commands (src/redis/commands)', () => {
  // Each header's KEYS and ARGV against its wrapper: script-contracts.test.ts.
  it('compile on the server, includes inlined once each (SCRIPT LOAD)', async () => {
    const constants = { RESULT_BUCKET_ROWS: 100, RECORD_CLOCK_FRESH_MS: 1, RECORD_CLOCK_DRIFT: 0.0001 };
    for (const name of commands) {
      const script = LuaScript.load(name, constants);
      expect(script.source, name).not.toMatch(/@include/);
      expect(await redis.script('LOAD', script.source), name).toBe(script.sha);
    }
    // finish-create names run-status, result-bucket, row-results, redis-clock and create-marker once each.
    expect(FINISH_CREATE.source.match(/local function set_status/g)).toHaveLength(1);
    expect(FINISH_CREATE.source.match(/local function now_ms\(/g)).toHaveLength(1);
  });

  it('get the numbers TypeScript owns as locals above the script', () => {
    for (const script of [RECORD_RESULTS, REQUEUE_ROWS, FINISH_CREATE])
      expect(script.source.startsWith('local RESULT_BUCKET_ROWS = 100\n')).toBe(true);
    expect(FINISH_CREATE.source).toContain('local RECORD_CLOCK_FRESH_MS = 604800000\n');
    expect(FINISH_CREATE.source).toContain('local RECORD_CLOCK_DRIFT = 0.0001\n');
  });

  it('refuse a key list of another length than the file name says', async () => {
    await expect(RECORD_RESULTS.lua.run(redis, ['a'], [])).rejects.toThrow(/8 keys was given 1/);
  });
});
