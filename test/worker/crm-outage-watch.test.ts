import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CrmOutageWatch } from '../../src/worker/crm-outage-watch.js';
import { captureLogger } from '../helpers/log-capture.js';
import { startHarness, type Harness, dealValuesFile } from '../helpers/pipeline.js';

describe('CRM outage lines', () => {
  it('warns once when requests keep failing past the threshold, with counts, and says when the CRM answers again', async () => {
    const { logger, lines } = captureLogger();
    const watch = new CrmOutageWatch({ logger, thresholdMs: 200, rowsWaiting: async () => 42 });
    watch.onFailure('ECONNREFUSED');
    watch.onFailure('ECONNREFUSED');
    expect(lines).toEqual([]); // a blip is not an outage
    await sleep(250);
    watch.onFailure('ECONNREFUSED');
    watch.onFailure('ECONNREFUSED');
    await sleep(10);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ requestsFailed: 3, rowsWaiting: 42 });
    expect(warnings[0]?.msg).toMatch(/3 requests failed, 42 rows waiting/);
    expect(warnings[0]?.msg).toMatch(/has not answered a request successfully/);
    watch.onSuccess();
    expect(lines.at(-1)).toMatchObject({ level: 30, requestsFailed: 4 });
    expect(lines.at(-1)?.msg).toMatch(/answers again/);
    // A success resets it: the next failure starts a new count, with no line yet.
    watch.onFailure('503');
    watch.onSuccess();
    expect(lines).toHaveLength(2);
  });
});

describe('a worker whose CRM keeps failing', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      records: 20,
      seed: 21,
      crmProxy: true,
      retry: { attempts: 50, backoffMs: 100 },
      workspace: { outageWarningMs: 1000 },
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("warns after the workspace's outageWarningMs with requests failed and rows waiting, and says when it answers again", async () => {
    h.proxy!.setRules([{ method: 'PATCH', path: /\/v2\/deals\/[^/]+$/, fail502: true }]);
    const { logger, lines } = captureLogger('info');
    await h.startWorkers({ logger, concurrency: 2 });
    const deals = [...h.ws.deals.values()].slice(0, 20);
    const run = await h.importFile(dealValuesFile(h, 'outage.csv', 500, deals), 'deal.update');
    const warned = () => lines.find((l) => l.level === 40 && /has not answered a request successfully/.test(l.msg));
    for (let i = 0; i < 200 && !warned(); i++) await sleep(50);
    expect(warned()).toMatchObject({ requestsFailed: expect.any(Number), rowsWaiting: 20 });
    h.proxy!.setRules([]);
    const done = await h.waitForRun(run.id, 30_000);
    expect(done.counts).toMatchObject({ total: 20, succeeded: 20 });
    expect(lines.some((l) => l.level === 30 && /the CRM answers again/.test(l.msg))).toBe(true);
  }, 40_000);
});
