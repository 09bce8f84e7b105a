import { afterEach, describe, expect, it } from 'vitest';
import { requestBudgetKey } from '../../src/keys/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('an unknown rate limit is learned, shared and remembered', () => {
  it('the first run finds the limit through 429s; the next run starts from it and meets a handful at most', async () => {
    // 200 rows a run: the first run must last past its second 429 episode, the one that measures
    // the CRM's rate. With 100, a loaded machine (slow first requests, the first 429 at ~60 rows)
    // ended it after one cut, its rate halfway through regrowing (ceiling still unknown: 55-63/s
    // seen against a CRM at 20/s), and the next run then met 6 429s bringing that down.
    h = await startHarness({
      records: 200,
      simRateLimit: { max: 20, windowMs: 1000 },
      retry: { attempts: 1, backoffMs: 100 },
    });
    // Two pools: two processes' worth, one learned rate between them.
    await h.startWorkers({ concurrency: 4 });
    await h.startWorkers({ concurrency: 4 });
    const deals = [...h.ws.deals.values()];
    const file = (name: string) =>
      h!.file(
        name,
        csv(
          ['id', 'name'],
          deals.map((d) => [d.id, name]),
        ),
      );
    const first = await h.waitForRun((await h.importFile(file('first.csv'), 'deal.update')).id, 60_000);
    expect(first.counts).toMatchObject({ total: 200, succeeded: 200 }); // 429s spent no attempt (1 allowed)
    const firstLimited = h.ws.stats.rateLimited;
    expect(firstLimited).toBeGreaterThan(0);
    // Cold, the rate doubles every quarter second until the first 429; with no burst an episode
    // meets only the requests in flight (8 in the two pools): the climb's, the measure's, and at
    // most one more if the measure came out a little high.
    expect(firstLimited).toBeLessThanOrEqual(24);
    const [rate = 0, ceiling = 0] = (
      await h.runtime.redis.hmget(`${requestBudgetKey(h.config.prefix, 'acme')}:rate`, 'rate', 'ceiling')
    ).map(Number);
    // A rate was learned, below the overshoot that met the 429s (the first cut halves it, or
    // takes what the CRM accepted so far). A ceiling is known only once two 429s measured the
    // CRM's rate: a run slowed by a loaded machine may end after one cut, with none yet.
    expect(rate).toBeGreaterThan(0);
    expect(rate).toBeLessThan(40);
    if (ceiling > 0) {
      // Measured between two 429s: what the CRM accepted, its pause and pending grants left out
      // (a second 429 of an episode once counted the pause's second as ~20 requests sent).
      expect(ceiling).toBeGreaterThan(16);
      expect(ceiling).toBeLessThan(24);
    }
    expect(await h.runtime.redis.pttl(`${requestBudgetKey(h.config.prefix, 'acme')}:rate`)).toBe(-1); // kept between runs
    // The next run (the learned rate has no expiry) goes at it from its first request.
    const second = await h.waitForRun((await h.importFile(file('second.csv'), 'deal.update')).id, 60_000);
    expect(second.counts).toMatchObject({ total: 200, succeeded: 200 });
    // It may still probe a little above a ceiling the first run set low (the first 429 halves).
    expect(h.ws.stats.rateLimited - firstLimited).toBeLessThanOrEqual(5);
    expect(h.ws.stats.writes.dealUpdate).toBe(400);
  }, 150_000);
});
