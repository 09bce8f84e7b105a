import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { multipartBody, seedFailedRun, startLiveDashboard, type LiveDashboard } from './live-dashboard.js';

/**
 * Finding: every ignored line of a corrected upload was kept and answered whole (a 20 MB file of
 * ignored lines took the dashboard to 2.4–2.9 GB and answered 512 MB of JSON). Memory figures
 * are in bench/dashboard-upload.ts; here, the answer and the count.
 */
let h: Harness;
let d: LiveDashboard;
let cookie: string;
let runId: string;

beforeAll(async () => {
  h = await startHarness({ records: 3 });
  runId = await seedFailedRun(h, 3);
  d = await startLiveDashboard({ harness: h, dashboard: { concurrency: { upload: { running: 1, waiting: 0 } } } });
  cookie = await d.signIn();
});
afterAll(async () => {
  await d?.close();
  await h?.close();
});

const ignoredFile = (lines: number) => `crm_sync_row,x\n${'x,1\n'.repeat(lines)}`;

async function upload(content: string, accept = 'application/json') {
  const _csrf = await d.formToken(cookie);
  const { body, type } = multipartBody({ _csrf }, { name: 'corrected.csv', content });
  return d.ask({ method: 'POST', path: `/runs/${runId}/upload`, headers: { cookie, origin: d.origin, accept, 'content-type': type }, body });
}

describe('uploads are bounded', () => {
  it('a file of 1,000,000 ignored lines: every line counted, 200 listed with their reason, a small answer', async () => {
    const lines = 1_000_000;
    const res = await upload(ignoredFile(lines));
    expect(res.status).toBe(200);
    const answer = res.json<{ ignored: Array<{ line: number; reason: string }>; ignoredCount: number; progress: { read: number } }>();
    expect(answer.ignoredCount).toBe(lines);
    expect(answer.ignored).toHaveLength(200);
    expect(answer.ignored[0]).toEqual({ row: null, line: 2, reason: 'no crm_sync_row column: use a file made by "runs export"' });
    expect(answer.progress.read).toBe(0);
    expect(res.body.length).toBeLessThan(64 * 1024);

    const page = await upload(ignoredFile(5000), 'text/html');
    expect(page.status).toBe(200);
    expect(page.text).toContain('5,000 lines were ignored');
    expect(page.text).toContain('… and 4,800 more (only the first 200 are listed).');
    expect(page.body.length).toBeLessThan(64 * 1024);
    expect(await h.runtime.store.requireRun(runId)).toMatchObject({ status: 'completed', counts: { failed: 3, queued: 0 } });
  }, 60_000);

  it('counts lines of another run, unknown rows and unreadable lines the same way', async () => {
    const other = '20990101-000000-000-000zzzzz';
    const content = `crm_sync_run_id,crm_sync_row,name\n${other},1,a\n${runId},999,b\n${runId},2,"unclosed\n`;
    const res = await upload(content);
    expect(res.status).toBe(200);
    const answer = res.json<{ ignored: Array<{ reason: string }>; ignoredCount: number }>();
    expect(answer.ignoredCount).toBe(answer.ignored.length);
    expect(answer.ignored.map((i) => i.reason).join('\n')).toMatch(new RegExp(`belongs to run ${other}`));
    expect(answer.ignored.map((i) => i.reason).join('\n')).toMatch(/not a failed, invalid or uncertain row of this run/);
  });

  it('uploads are served a few at a time: one more is told to come back (503, Retry-After)', async () => {
    const big = ignoredFile(1_500_000);
    const [a, b] = await Promise.all([upload(big), upload(big)]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([200, 503]);
    const busy = a.status === 503 ? a : b;
    expect(busy.headers['retry-after']).toBe('2');
    expect(busy.json<{ error: string }>().error).toBe('DASHBOARD_BUSY');
  }, 60_000);
});
