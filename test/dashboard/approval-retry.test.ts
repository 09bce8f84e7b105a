import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { ORIGIN, csrfOf, multipart, startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

/*
 * The dashboard's corrected upload and Retry button in a workspace with "requireApproval": true
 * (issue 41, item 8) obey the rule `runs retry` obeys (retryRun): an uploaded file's edited values
 * are refused (409 APPROVAL_REQUIRED, the plan command named, nothing sent, the run untouched); the
 * Retry button sends the rows' stored values. The simulator over HTTP, a CRM fault proxy failing
 * the first writes so the run has failed rows.
 */

let d: DashboardHarness;
beforeAll(async () => {
  d = await startDashboardHarness({
    records: 20,
    workspace: { requireApproval: true },
    crmProxy: true,
    retry: { attempts: 1, backoffMs: 10 },
  });
  await d.h.startWorkers();
});
afterAll(async () => d?.close());

const updates = () => d.h.ws.stats.writes.contactUpdate;

describe('requireApproval on the dashboard: upload and Retry', () => {
  it('an upload of edited values is refused (409), writes none; Retry sends the stored values', async () => {
    const { h } = d;
    const contacts = [...h.ws.contacts.values()].slice(0, 4);
    const file = h.file(
      'stored.csv',
      csv(
        ['id', 'name'],
        contacts.map((c, i) => [c.id, `Stored ${i}`]),
      ),
    );
    h.proxy!.setRules([{ method: 'PATCH', fail502: true, times: 4 }]);
    const run = await h.waitForRun((await h.importFile(file, 'contact.update')).id);
    expect(run.counts).toMatchObject({ total: 4, failed: 4 });
    h.proxy!.setRules([]);

    const exported = await d.get(`/runs/${run.id}/results.csv?failed=1`);
    const edited = exported.body.replaceAll('Stored ', 'Edited ');
    expect(edited).toContain('Edited 0');
    const before = updates();
    const _csrf = csrfOf((await d.get(`/runs/${run.id}`)).body);
    const form = multipart({ _csrf }, { field: 'file', name: 'failed.csv', content: edited });
    const res = await d.app.inject({
      method: 'POST',
      url: `/runs/${run.id}/upload`,
      headers: { ...d.browser, origin: ORIGIN, 'content-type': form.contentType, accept: 'application/json' },
      payload: form.body,
    });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.body).toContain('APPROVAL_REQUIRED');
    expect(res.body).toContain('crm-sync plan <source file> --op contact.update -w acme');
    expect(updates()).toBe(before);
    for (const c of contacts) expect(h.ws.contacts.get(c.id)!.name).toBe(c.name);
    expect((await h.runtime.store.requireRun(run.id)).counts).toMatchObject({ failed: 4, succeeded: 0 });

    const retry = await d.app.inject({
      method: 'POST',
      url: `/runs/${run.id}/retry`,
      headers: { ...d.browser, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf, scope: 'failed' }).toString(),
    });
    expect(retry.statusCode, retry.body).toBe(303);
    const done = await h.waitForRun(run.id);
    expect(done.counts).toMatchObject({ succeeded: 4, failed: 0 });
    expect(updates()).toBe(before + 4);
    for (const [i, c] of contacts.entries()) expect(h.ws.contacts.get(c.id)!.name).toBe(`Stored ${i}`);
  });
});
