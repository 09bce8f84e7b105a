import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv } from '../helpers/pipeline.js';
import { startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

/*
 * Issue 34 item 5: the run page's Undo button plans the undo (nothing sent) and opens the plan;
 * a record's page lists every change crm-sync made to it, newest first. Simulator over HTTP,
 * real Redis.
 */

let d: DashboardHarness;
let runId = '';
const contacts: Array<{ id: string; name: string }> = [];
beforeAll(async () => {
  d = await startDashboardHarness({ records: 30 });
  await d.h.startWorkers();
  for (const c of [...d.h.ws.contacts.values()].slice(0, 5)) contacts.push({ id: c.id, name: c.name });
  const file = d.h.file(
    'renames.csv',
    csv(
      ['id', 'name'],
      contacts.map((c, i) => [c.id, `Dash <b>${i}</b>`]),
    ),
  );
  const run = await d.h.waitForRun((await d.h.importFile(file, 'contact.update')).id, 60_000);
  expect(run.counts.succeeded).toBe(5);
  runId = run.id;
}, 120_000);
afterAll(async () => d?.close());

describe('undo and record pages (issue 34)', () => {
  it('the run page has an Undo button; it plans the undo and opens the plan, sending nothing', async () => {
    const page = await d.get(`/runs/${runId}`);
    expect(page.body).toContain(`action="/runs/${runId}/undo"`);
    const writes = d.h.ws.stats.writes.contactUpdate;
    const answer = await d.post(`/runs/${runId}/undo`);
    expect(answer.statusCode).toBe(303);
    const planUrl = String(answer.headers.location);
    expect(planUrl).toMatch(/^\/plans\/plan-[^?]+\?done=undo$/);
    expect(d.h.ws.stats.writes.contactUpdate).toBe(writes);
    const plan = await d.get(planUrl);
    expect(plan.statusCode).toBe(200);
    expect(plan.body).toContain(`undo of run ${runId}`);
  });

  it("a record's page lists what crm-sync wrote over what, HTML-escaped", async () => {
    const page = await d.get(`/records/acme/${contacts[2]!.id}`);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain(runId);
    expect(page.body).toContain('Dash &lt;b&gt;2&lt;/b&gt;');
    expect(page.body).not.toContain('Dash <b>2</b>');
    const json = await d.get(`/records/acme/${contacts[2]!.id}`, { ...d.bearer, accept: 'application/json' });
    expect(json.json().entries).toEqual([
      expect.objectContaining({ runId, field: 'name', before: contacts[2]!.name, after: 'Dash <b>2</b>' }),
    ]);
    expect((await d.get('/records/globex/x')).statusCode).toBe(400);
  });
});
