import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePlan, PlanStore, type PlanRecord } from '../../src/plans/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { silentLogger } from '../../src/log/index.js';
import { csv } from '../helpers/pipeline.js';
import { form, ORIGIN, startDashboardHarness, type DashboardHarness } from './dashboard-fixture.js';

/*
 * The dashboard's plan page (issue 33): counts by action, before → after per field with filters
 * and paging, the CSV download, and an Approve button that needs the session's form token and
 * records which session approved.
 */

let d: DashboardHarness;
let plan: PlanRecord;
let plans: PlanStore;

beforeAll(async () => {
  d = await startDashboardHarness({ records: 30 });
  const { h } = d;
  const contacts = [...h.ws.contacts.values()].slice(0, 25);
  const file = h.file(
    'renames.csv',
    csv(
      ['id', 'name'],
      contacts.map((c, i) => [c.id, i < 5 ? c.name : `Page ${i}`]),
    ),
  );
  plans = new PlanStore({ redis: h.runtime.redis, prefix: h.config.prefix });
  const client = createCrmClient(h.config, 'acme', silentLogger);
  try {
    ({ plan } = await makePlan({
      store: plans,
      file,
      op: 'contact.update',
      workspace: 'acme',
      client,
      settings: { planTtlMs: 60_000, driftMaxAgeMs: 10_000 },
    }));
  } finally {
    client.close();
  }
}, 30_000);

afterAll(async () => d?.close());

describe('dashboard plan page', () => {
  it('shows counts, before -> after, filters and pages', async () => {
    const res = await d.get(`/plans/${plan.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(/data-kind="update"><b>20<\/b>/);
    expect(res.body).toMatch(/data-kind="skip"><b>5<\/b>/);
    expect(res.body).toContain('<td>Page 5</td>');
    const skips = await d.get(`/plans/${plan.id}?action=skip`);
    expect(skips.body).not.toContain('<td>Page 5</td>');
    expect(skips.body.match(/<tr data-row=/g)).toHaveLength(5);
    const text = await d.get(`/plans/${plan.id}?q=page%2017`);
    expect(text.body.match(/<tr data-row=/g)).toHaveLength(1);
    const csvRes = await d.get(`/plans/${plan.id}/plan.csv?action=update`);
    expect(csvRes.headers['content-type']).toContain('text/csv');
    expect(csvRes.body.trim().split('\n')).toHaveLength(21);
  });

  it('approves with the form token only, records the session, and is scoped like every route', async () => {
    const noToken = await d.app.inject({
      method: 'POST',
      url: `/plans/${plan.id}/approve`,
      headers: { ...d.browser, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      payload: form({}),
    });
    expect(noToken.statusCode).toBe(403);
    expect((await plans.require(plan.id)).status).toBe('pending');
    const page = await d.get(`/plans/${plan.id}`);
    expect(page.body).toContain(`action="/plans/${plan.id}/approve"`);
    const res = await d.post(`/plans/${plan.id}/approve`);
    expect(res.statusCode).toBe(303);
    const approved = await plans.require(plan.id);
    expect(approved.status).toBe('approved');
    expect(approved.approval?.by).toMatch(/^dashboard:session-[0-9a-f]{12}$/);
    expect((await d.get(`/plans/${plan.id}?done=approve`)).body).toContain('Plan approved.');
    expect((await d.get('/plans/plan-20260101-000000-000-000aaaaa')).statusCode).toBe(404);
    expect((await d.get('/plans/nonsense')).statusCode).toBe(404);
  });
});
