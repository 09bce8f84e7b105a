import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { ORIGIN, csrfOf, multipart, startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

/*
 * A corrected upload or a Retry press whose rows a later run already wrote (issue 31, item 3):
 * the answer says how many rows it will not send and why, and the form's checkbox sends them
 * as new writes instead.
 */

let d: DashboardHarness;
beforeAll(async () => {
  d = await startDashboardHarness({ records: 20, retry: { attempts: 1, backoffMs: 10 } });
  await d.h.startWorkers();
});
afterAll(async () => d?.close());

/** Four deals whose run A failed (bad stage), then a later run B wrote name and value of each. */
async function failedThenWrittenLater(offset: number, label: string) {
  const deals = [...d.h.ws.deals.values()].slice(offset, offset + 4);
  const a = d.h.file(
    `${label}-a.csv`,
    csv(
      ['id', 'name', 'value', 'stage_id'],
      deals.map((x, i) => [x.id, `${label} A ${i}`, 10 + i, 'stg_missing']),
    ),
  );
  const runA = await d.h.waitForRun((await d.h.importFile(a, 'deal.update')).id);
  expect(runA.counts.failed).toBe(4);
  const b = d.h.file(
    `${label}-b.csv`,
    csv(
      ['id', 'name', 'value', 'stage_id'],
      // B writes every field of the first two deals, and all but the stage of the last two.
      deals.map((x, i) => [x.id, `${label} B ${i}`, 20 + i, i < 2 ? d.h.ws.stages[0]!.id : '']),
    ),
  );
  await d.h.waitForRun((await d.h.importFile(b, 'deal.update')).id);
  return { deals, runA };
}

async function upload(runId: string, fields: Record<string, string>) {
  const exported = await d.get(`/runs/${runId}/results.csv?failed=1`);
  // The operator fixes the stage in the spreadsheet.
  const fixed = exported.body.replaceAll('stg_missing', d.h.ws.stages[0]!.id);
  const _csrf = csrfOf((await d.get(`/runs/${runId}`)).body);
  const form = multipart({ _csrf, ...fields }, { field: 'file', name: 'failed.csv', content: fixed });
  return d.app.inject({
    method: 'POST',
    url: `/runs/${runId}/upload`,
    headers: { ...d.browser, origin: ORIGIN, 'content-type': form.contentType },
    payload: form.body,
  });
}

describe('a retry of rows a later run wrote, on the dashboard', () => {
  it('the run page offers the choice next to Retry and the upload', async () => {
    const { runA } = await failedThenWrittenLater(0, 'offer');
    const page = (await d.get(`/runs/${runA.id}`)).body;
    expect(page.match(/name="resendSuperseded"/g)?.length).toBe(2);
  });

  it('an upload answers how many rows a later run wrote and were not sent; only the rest is written', async () => {
    const { deals, runA } = await failedThenWrittenLater(4, 'skip');
    const res = await upload(runA.id, {});
    expect(res.statusCode, res.body).toBe(303);
    const answer = await d.get(res.headers.location as string);
    expect(answer.body).toContain('2 rows sent again.');
    expect(answer.body).toContain('2 rows not sent again: later runs already wrote every field they would change');
    expect(answer.body).toContain('tick &quot;also send rows a later run wrote since&quot;');
    const done = await d.h.waitForRun(runA.id);
    expect(done.counts).toMatchObject({ superseded: 2, succeeded: 2, failed: 0 });
    // The later run's values stay; the last two deals get only the stage, which B did not write.
    for (const [i, x] of deals.entries())
      expect(d.h.ws.deals.get(x.id)).toMatchObject({
        name: `skip B ${i}`,
        value: 20 + i,
        stage_id: d.h.ws.stages[0]!.id,
      });
  });

  it('with the box ticked, the rows are sent as new writes and their values become the latest', async () => {
    const { deals, runA } = await failedThenWrittenLater(8, 'resend');
    const res = await upload(runA.id, { resendSuperseded: '1' });
    const answer = await d.get(res.headers.location as string);
    expect(answer.body).toContain('2 rows a later run had written are sent as new writes');
    const done = await d.h.waitForRun(runA.id);
    expect(done.counts).toMatchObject({ succeeded: 4, superseded: 0, failed: 0 });
    // The two deals B wrote in full take A's values; the other two keep B's name and value (B
    // wrote them later) and get A's stage, which B did not write.
    for (const [i, x] of deals.entries())
      expect(d.h.ws.deals.get(x.id)).toMatchObject(
        i < 2
          ? { name: `resend A ${i}`, value: 10 + i }
          : { name: `resend B ${i}`, value: 20 + i, stage_id: d.h.ws.stages[0]!.id },
      );
  });

  it('the Retry button answers the same way', async () => {
    const { runA } = await failedThenWrittenLater(12, 'button');
    // The stored rows still carry the bad stage: only the rows B did not write in full go.
    const _csrf = csrfOf((await d.get(`/runs/${runA.id}`)).body);
    const res = await d.app.inject({
      method: 'POST',
      url: `/runs/${runA.id}/retry`,
      headers: { ...d.browser, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf, scope: 'failed' }).toString(),
    });
    expect(res.statusCode, res.body).toBe(303);
    const notice = (await d.get(res.headers.location as string)).body;
    expect(notice).toContain('2 rows sent again. 2 rows not sent again: later runs already wrote every field');
  });
});
