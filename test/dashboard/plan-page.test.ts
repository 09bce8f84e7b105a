import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { applyPlan, makePlan, PlanStore, type PlanRecord } from '../../src/plans/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { silentLogger } from '../../src/log/index.js';
import { csv } from '../helpers/pipeline.js';
import {
  csrfOf,
  form,
  HOST,
  ORIGIN,
  signIn,
  startDashboardHarness,
  TOKEN,
  type DashboardHarness,
} from './dashboard-fixture.js';

/*
 * The dashboard's plan pages (issue 33): counts by action, before → after per field with filters
 * and paging, the CSV download, Approve and Discard buttons that need the session's form token
 * and record which session pressed them; the plans list; the links between an applied plan and
 * its run; and a dashboard started with -w that neither shows nor moves another workspace's plan.
 */

let d: DashboardHarness;
let plan: PlanRecord;
let plans: PlanStore;

/** A stored plan of acme's contacts: the first `same` keep their names, the rest are renamed. */
async function renamePlan(name: string, count: number, same: number): Promise<PlanRecord> {
  const { h } = d;
  const contacts = [...h.ws.contacts.values()].slice(0, count);
  const file = h.file(
    name,
    csv(
      ['id', 'name'],
      contacts.map((c, i) => [c.id, i < same ? c.name : `Page ${i}`]),
    ),
  );
  const client = createCrmClient(h.config, 'acme', silentLogger);
  try {
    const made = await makePlan({
      store: plans,
      file,
      op: 'contact.update',
      workspace: 'acme',
      client,
      settings: { planTtlMs: 60_000, driftMaxAgeMs: 10_000 },
    });
    return made.plan;
  } finally {
    client.close();
  }
}

/** A plan of another workspace, stored directly (no CRM behind it is needed to list it). */
async function otherWorkspacePlan(workspace: string): Promise<PlanRecord> {
  const writer = await plans.begin({
    workspace,
    operation: 'contact.update',
    source: '/tmp/elsewhere.csv',
    matchKey: 'id',
    ttlMs: 60_000,
  });
  await writer.add({ row: 1, action: 'update', recordId: 'c_1', fields: { name: 'X' }, before: { name: 'Y' } });
  return writer.finish({
    rows: 1,
    fields: ['name'],
    counts: { update: 1, create: 0, skip: 0, 'not-found': 0, ambiguous: 0, invalid: 0 },
    prediction: { requests: 2, writes: 1, listPages: 1, limit: 'unknown limit' },
  });
}

/** A form post to `app` from a browser signed in there, with that page's form token. */
async function postFrom(app: FastifyInstance, cookie: string, url: string, fields: Record<string, string>) {
  return app.inject({
    method: 'POST',
    url,
    headers: { host: HOST, cookie, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
    payload: form(fields),
  });
}

beforeAll(async () => {
  d = await startDashboardHarness({ records: 30 });
  plans = new PlanStore({ redis: d.h.runtime.redis, prefix: d.h.config.prefix });
  plan = await renamePlan('renames.csv', 25, 5);
}, 30_000);

afterAll(async () => d?.close());

describe('dashboard plan page', () => {
  it('shows counts, before -> after, filters and pages', async () => {
    const res = await d.get(`/plans/${plan.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(/data-kind="update"><b>20<\/b>/);
    expect(res.body).toMatch(/data-kind="skip"><b>5<\/b>/);
    expect(res.body).toContain('<td>Page 5</td>');
    // Approval is optional here: the button says what it does.
    expect(res.body).toContain('>Apply without approval</button>');
    expect(res.body).toContain('not approved — this workspace does not require approval');
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

describe('dashboard plans list', () => {
  it('lists the plans newest first with status, counts, expiry, and is in the navigation next to Runs', async () => {
    const later = await renamePlan('later.csv', 8, 2);
    const res = await d.get('/plans');
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('<a href="/" class="">Runs</a><a href="/plans" class="active">Plans</a>');
    const at = (id: string) => res.body.indexOf(`data-plan="${id}"`);
    expect(at(later.id)).toBeGreaterThan(-1);
    expect(at(plan.id)).toBeGreaterThan(at(later.id));
    const line = res.body.slice(at(later.id), res.body.indexOf('</tr>', at(later.id)));
    expect(line).toContain(`href="/plans/${later.id}"`);
    expect(line).toContain('<b>later.csv</b>');
    expect(line).toContain('data-status="pending"');
    expect(line).toMatch(/data-kind="update"><b>6<\/b> update/);
    expect(line).toMatch(/data-kind="skip"><b>2<\/b> skip/);
    expect(line).toMatch(/expires \d{4}-\d\d-\d\d \d\d:\d\d UTC/);
    expect(line).toContain(`action="/plans/${later.id}/discard"`);
    const json = JSON.parse((await d.get('/plans', { ...d.browser, accept: 'application/json' })).body) as {
      total: number;
      plans: PlanRecord[];
    };
    expect(json.plans.map((p) => p.id).slice(0, 2)).toEqual([later.id, plan.id]);
    await plans.discard(later.id, 'test');
  });

  it('discards with the form token only, records the session, and a discarded plan is not approved', async () => {
    const target = await renamePlan('to-discard.csv', 6, 0);
    const noToken = await d.app.inject({
      method: 'POST',
      url: `/plans/${target.id}/discard`,
      headers: { ...d.browser, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      payload: form({ from: 'list' }),
    });
    expect(noToken.statusCode).toBe(403);
    expect((await plans.require(target.id)).status).toBe('pending');
    const res = await d.post(`/plans/${target.id}/discard`, { from: 'list' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/plans?done=discard&plan=${target.id}`);
    const gone = await plans.require(target.id);
    expect(gone.status).toBe('discarded');
    expect(gone.discard?.by).toMatch(/^dashboard:session-[0-9a-f]{12}$/);
    const list = (await d.get(String(res.headers.location))).body;
    expect(list).toContain(`Plan ${target.id} discarded.`);
    const at = list.indexOf(`data-plan="${target.id}"`);
    const line = list.slice(at, list.indexOf('</tr>', at));
    expect(line).toContain('data-status="discarded"');
    expect(line).not.toContain('/discard"');
    const own = (await d.get(`/plans/${target.id}`)).body;
    expect(own).toContain('discarded');
    expect(own).toContain(gone.discard!.by);
    expect(own).not.toContain('Approve plan');
    const again = await d.post(`/plans/${target.id}/approve`);
    expect(again.statusCode).toBe(409);
    expect(again.body).toContain(`plan ${target.id} was discarded: it can no longer be approved`);
    // From the plan's own page, the button leads back there.
    const other = await renamePlan('to-discard-2.csv', 3, 0);
    const back = await d.post(`/plans/${other.id}/discard`, { from: 'plan' });
    expect(back.headers.location).toBe(`/plans/${other.id}?done=discard`);
  });

  it("links an applied plan to the run it made, and the run's page back to its plan", async () => {
    const applied = await renamePlan('applied.csv', 4, 0);
    const { run } = await applyPlan({
      plans,
      store: d.h.runtime.store,
      queue: d.h.runtime.queue('acme'),
      planId: applied.id,
      requireApproval: false,
    });
    const list = (await d.get('/plans')).body;
    const at = list.indexOf(`data-plan="${applied.id}"`);
    const line = list.slice(at, list.indexOf('</tr>', at));
    expect(line).toContain('data-status="applied"');
    expect(line).toContain(`href="/runs/${run.id}"`);
    const own = (await d.get(`/plans/${applied.id}`)).body;
    expect(own).toMatch(new RegExp(`data-plan-run>applied by run <a class="mono" href="/runs/${run.id}">`));
    expect(own).not.toContain('Approve plan');
    expect(own).not.toContain('>Discard</button>');
    const runPage = (await d.get(`/runs/${run.id}`)).body;
    expect(runPage).toContain(`href="/plans/${applied.id}"`);
    expect(runPage).toContain('Plan: applied.csv');
  });

  it('pages the list', async () => {
    const app = await buildDashboard({ runtime: d.h.runtime, token: new Secret(TOKEN), runsPageSize: 2 });
    try {
      const cookie = await signIn(app);
      const get = (url: string) => app.inject({ method: 'GET', url, headers: { host: HOST, cookie } });
      const total = (await plans.list({ workspace: 'acme', limit: 1000 })).length;
      expect(total).toBeGreaterThan(2);
      const first = (await get('/plans')).body;
      expect(first.match(/<tr data-plan=/g)).toHaveLength(2);
      expect(first).toContain(`Plans 1–2 of ${total}`);
      expect(first).toContain('href="/plans?page=2">Older →');
      const second = (await get('/plans?page=2')).body;
      expect(second).toContain('href="/plans?page=1">← Newer');
      expect(second.match(/<tr data-plan=/g)!.length).toBeGreaterThan(0);
    } finally {
      await app.close();
    }
  });
});

describe('a dashboard started with -w', () => {
  it("neither shows, downloads, approves nor discards another workspace's plan: 404 like a run", async () => {
    const own = await renamePlan('scoped.csv', 3, 0);
    const globex = await otherWorkspacePlan('globex');
    // The unscoped dashboard lists both.
    const all = (await d.get('/plans')).body;
    expect(all).toContain(`data-plan="${globex.id}"`);
    expect(all).toContain(`data-plan="${own.id}"`);
    const app = await buildDashboard({ runtime: d.h.runtime, token: new Secret(TOKEN), workspaces: ['acme'] });
    try {
      const cookie = await signIn(app);
      const get = (url: string) => app.inject({ method: 'GET', url, headers: { host: HOST, cookie } });
      const list = (await get('/plans')).body;
      expect(list).toContain(`data-plan="${own.id}"`);
      expect(list).not.toContain(globex.id);
      const json = JSON.parse(
        (
          await app.inject({
            method: 'GET',
            url: '/plans',
            headers: { host: HOST, cookie, accept: 'application/json' },
          })
        ).body,
      ) as { total: number; plans: PlanRecord[] };
      expect(json.plans.every((p) => p.workspace === 'acme')).toBe(true);
      expect(json.total).toBe((await plans.list({ workspace: 'acme', limit: 1000 })).length);
      const _csrf = csrfOf(list);
      expect((await get(`/plans/${globex.id}`)).statusCode).toBe(404);
      expect((await get(`/plans/${globex.id}/plan.csv`)).statusCode).toBe(404);
      expect((await postFrom(app, cookie, `/plans/${globex.id}/approve`, { _csrf })).statusCode).toBe(404);
      expect((await postFrom(app, cookie, `/plans/${globex.id}/discard`, { _csrf })).statusCode).toBe(404);
      expect((await plans.require(globex.id)).status).toBe('pending');
      // Its own workspace's plan is served and approved as usual.
      expect((await get(`/plans/${own.id}`)).statusCode).toBe(200);
      expect((await postFrom(app, cookie, `/plans/${own.id}/approve`, { _csrf })).statusCode).toBe(303);
      expect((await plans.require(own.id)).status).toBe('approved');
    } finally {
      await app.close();
    }
  });
});
