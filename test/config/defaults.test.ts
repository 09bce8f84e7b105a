import { describe, expect, it } from 'vitest';
import { configFromObject, DEFAULTS, derivedSettings, resolveSettings } from '../../src/config/index.js';
import { createMarkerTtlMs } from '../../src/runs/index.js';

const DAY = 86_400_000;

describe('defaults, once', () => {
  it('a workspace with nothing set gets DEFAULTS.workspace from the schema and the loader', () => {
    const config = configFromObject(
      { workspaces: { acme: { baseUrl: 'http://acme.localhost:4010/api/external', apiKeyEnv: 'K' } } },
      { source: null, env: {} },
    );
    const w = DEFAULTS.workspace;
    expect(config.workspaces.acme).toMatchObject({
      retry: w.retry,
      listVersion: w.listVersion,
      rowsPerJob: w.rowsPerJob,
      createSettleMs: w.createSettleMs,
      requestTimeoutMs: w.requestTimeoutMs,
      outageWarningMs: w.outageWarningMs,
      breaker: w.breaker,
    });
    expect(config.retention).toEqual({ days: DEFAULTS.retention.days });
    expect(config.redisUrl).toBe(DEFAULTS.config.redisUrl);
    expect(config.prefix).toBe(DEFAULTS.config.prefix);
  });

  it('derived values: the values the code had inline, and they follow their setting', () => {
    const d = derivedSettings();
    expect(d.writeLeaseMs).toBe(30_000);
    expect(d.retentionMs).toBe(30 * DAY);
    expect(d.createMarkerTtlMs).toBe(32 * DAY);
    expect(d.jobRetention).toEqual({
      removeOnComplete: { age: 3600, count: 1000 },
      removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
    });
    expect(d.forceExitAfterMs).toBe(4000);
    // The write lease follows the request timeout (it did not in row-fence.ts before).
    expect(derivedSettings({ requestTimeoutMs: 40_000 }).writeLeaseMs).toBe(55_000);
    expect(derivedSettings({ retention: { days: 7 } }).createMarkerTtlMs).toBe(9 * DAY);
    expect(derivedSettings({ retentionMs: 1234 }).createMarkerTtlMs).toBe(1234 + 2 * DAY);
    expect(createMarkerTtlMs()).toBe(32 * DAY);
    expect(derivedSettings({ closeTimeoutsMs: [30_000, 30_000] }).forceExitAfterMs).toBe(64_000);
  });

  it('resolveSettings fills what is missing or undefined, and keeps what is given', () => {
    const o: { a?: number | undefined; b?: number; c: string } = { a: undefined, c: 'x' };
    expect(resolveSettings(o, { a: 1, b: 2 })).toEqual({ a: 1, b: 2, c: 'x' });
    expect(resolveSettings({ a: 0, b: 5 } as { a?: number; b?: number }, { a: 1, b: 2 })).toEqual({ a: 0, b: 5 });
  });
});
