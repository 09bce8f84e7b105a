import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { derivedSettings } from '../../src/config/index.js';
import { RunKeys } from '../../src/keys/index.js';
import { startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

/*
 * A dashboard retry puts back the create markers of uncertain creates with the life the config's
 * retention gives them, as `runs retry` does (one retry path, lifecycle's retryRows): in a
 * workspace kept 90 days, a marker of the default life (30 days + margin) would be gone while the
 * run can still be retried, and its row sent again without a look. The dashboard listens on a
 * real port and is called over HTTP; the marker's life is read from Redis. No worker runs: the
 * markers are put back before any row is queued.
 */

const DAY_MS = 86_400_000;
const RETENTION_DAYS = 90;

let d: DashboardHarness;
let base: string;
beforeAll(async () => {
  d = await startDashboardHarness({ records: 2, config: { retention: { days: RETENTION_DAYS } } });
  base = await d.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => d?.close());

/** A create run whose rows ended uncertain with no send evidence kept (a marker that is gone). */
async function uncertainCreateRun(rows: number): Promise<string> {
  const store = d.h.runtime.store;
  const run = await store.createRun({
    workspace: 'acme',
    operation: 'deal.create',
    source: 'deals.csv',
    columns: ['name', 'value'],
  });
  await store.addQueued(run.id, rows);
  const at = new Date().toISOString();
  await store.recordResults(
    run.id,
    Array.from({ length: rows }, (_, i) => ({
      row: i + 1,
      line: i + 2,
      status: 'uncertain' as const,
      code: 'CREATE_UNCERTAIN' as const,
      message: 'the answer was lost',
      original: { name: `Deal ${i + 1}`, value: String(10 + i) },
      at,
    })),
  );
  await store.finishProducing(run.id);
  return run.id;
}

const bearer = () => ({ authorization: d.bearer.authorization! });

async function markerLifeMs(runId: string): Promise<number> {
  const run = await d.h.runtime.store.requireRun(runId);
  return d.h.runtime.redis.pttl(new RunKeys(d.h.config.prefix).creating(run));
}

describe('a dashboard retry in a workspace kept 90 days', () => {
  const configured = derivedSettings({ retention: { days: RETENTION_DAYS } }).createMarkerTtlMs;
  const byDefault = derivedSettings().createMarkerTtlMs;

  it('the Retry button restores create markers that live 90 days + margin', async () => {
    expect(configured).toBeGreaterThan(RETENTION_DAYS * DAY_MS);
    expect(byDefault).toBeLessThan(RETENTION_DAYS * DAY_MS);
    const id = await uncertainCreateRun(2);
    expect(await markerLifeMs(id)).toBe(-2); // no marker before the retry
    const res = await fetch(`${base}/runs/${id}/retry`, {
      method: 'POST',
      headers: { ...bearer(), accept: 'application/json', 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { progress: { read: number } }).progress.read).toBe(2);
    const life = await markerLifeMs(id);
    expect(life).toBeGreaterThan(RETENTION_DAYS * DAY_MS);
    expect(life).toBeLessThanOrEqual(configured);
  });

  it('a corrected upload restores them with the same life', async () => {
    const id = await uncertainCreateRun(1);
    const exported = await fetch(`${base}/runs/${id}/results.csv?failed=1`, { headers: bearer() });
    expect(exported.status).toBe(200);
    const body = new FormData();
    body.append('file', new Blob([await exported.text()], { type: 'text/csv' }), 'failed.csv');
    const res = await fetch(`${base}/runs/${id}/upload`, {
      method: 'POST',
      headers: { ...bearer(), accept: 'application/json' },
      body,
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { progress: { read: number } }).progress.read).toBe(1);
    const life = await markerLifeMs(id);
    expect(life).toBeGreaterThan(RETENTION_DAYS * DAY_MS);
    expect(life).toBeLessThanOrEqual(configured);
  });
});
