import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { silentLogger } from '../../src/log/index.js';
import { makePlan, PlanStore, type PlanRecord } from '../../src/plans/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { csv } from '../helpers/pipeline.js';
import {
  form,
  HOST,
  ORIGIN,
  signIn,
  startDashboardHarness,
  TOKEN,
  type DashboardHarness,
} from './dashboard-fixture.js';

/*
 * The plan page's Apply button (issue 33): a form post with the session's form token, refused as
 * `crm-sync apply` refuses (here a workspace with "requireApproval": true: an unapproved plan, then
 * a plan applied already), nothing queued then; applied, the plan names its run and the session
 * that applied it, and the run writes the plan's rows to the simulator over HTTP.
 */

let d: DashboardHarness;
let plans: PlanStore;

async function renamePlan(name: string, count: number): Promise<PlanRecord> {
  const { h } = d;
  const contacts = [...h.ws.contacts.values()].slice(0, count);
  const file = h.file(
    name,
    csv(
      ['id', 'name'],
      contacts.map((c, i) => [c.id, `Applied ${i}`]),
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

beforeAll(async () => {
  d = await startDashboardHarness({ records: 30, workspace: { requireApproval: true } });
  plans = new PlanStore({ redis: d.h.runtime.redis, prefix: d.h.config.prefix });
}, 30_000);

afterAll(async () => d?.close());

describe('dashboard Apply button', () => {
  it('needs the form token, refuses what the CLI refuses, and applies an approved plan once, recording the session', async () => {
    const plan = await renamePlan('apply.csv', 6);
    const page = (await d.get(`/plans/${plan.id}`)).body;
    // This workspace requires approval: no Apply on a pending plan, only Approve and why.
    expect(page).not.toContain(`action="/plans/${plan.id}/apply"`);
    expect(page).toContain('approve it first: this workspace requires approval');

    const noToken = await d.app.inject({
      method: 'POST',
      url: `/plans/${plan.id}/apply`,
      headers: { ...d.browser, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      payload: form({}),
    });
    expect(noToken.statusCode).toBe(403);

    const unapproved = await d.post(`/plans/${plan.id}/apply`);
    expect(unapproved.statusCode).toBe(409);
    expect(unapproved.body).toContain(`plan ${plan.id} is not approved`);
    expect(unapproved.body).toContain('requireApproval');
    const still = await plans.require(plan.id);
    expect(still.status).toBe('pending');
    expect(still.runId).toBeUndefined();
    expect(still.apply).toBeUndefined();
    expect(d.h.ws.stats.writes.contactUpdate).toBe(0);

    expect((await d.post(`/plans/${plan.id}/approve`)).statusCode).toBe(303);
    const approvedPage = (await d.get(`/plans/${plan.id}`)).body;
    expect(approvedPage).toContain(`action="/plans/${plan.id}/apply"`);
    expect(approvedPage).toContain('>Apply plan</button>');
    const res = await d.post(`/plans/${plan.id}/apply`);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe(`/plans/${plan.id}?done=apply`);
    const applied = await plans.require(plan.id);
    expect(applied.runId).toBeDefined();
    expect(applied.apply?.by).toMatch(/^dashboard:session-[0-9a-f]{12}$/);
    expect(applied.apply?.by).toBe(applied.approval?.by);
    const after = (await d.get(String(res.headers.location))).body;
    expect(after).toContain(`Plan applied: run <a href="/runs/${applied.runId}">`);
    expect(after).toContain(`applied `);
    expect(after).toContain(applied.apply!.by);
    expect(after).not.toContain('Apply plan');

    const pool = await d.h.startWorkers();
    try {
      const run = await d.h.waitForRun(applied.runId!, 20_000);
      expect(run.counts).toMatchObject({ total: 6, succeeded: 6, drifted: 0 });
    } finally {
      await pool.close();
    }
    expect(d.h.ws.stats.writes.contactUpdate).toBe(6);
    expect((await plans.require(plan.id)).status).toBe('applied');

    const twice = await d.post(`/plans/${plan.id}/apply`);
    expect(twice.statusCode).toBe(409);
    expect(twice.body).toContain(`plan ${plan.id} was already applied by run ${applied.runId}`);
    expect(d.h.ws.stats.writes.contactUpdate).toBe(6);
  });

  it("is scoped like every route: a dashboard started with -w does not apply another workspace's plan", async () => {
    // A plan of another workspace, stored directly (no CRM behind it is needed to refuse it).
    const writer = await plans.begin({
      workspace: 'globex',
      operation: 'contact.update',
      source: '/tmp/elsewhere.csv',
      matchKey: 'id',
      ttlMs: 60_000,
    });
    await writer.add({ row: 1, action: 'update', recordId: 'c_1', fields: { name: 'X' }, before: { name: 'Y' } });
    const plan = await writer.finish({
      rows: 1,
      fields: ['name'],
      counts: { update: 1, create: 0, skip: 0, 'not-found': 0, ambiguous: 0, invalid: 0 },
      prediction: { requests: 2, writes: 1, listPages: 1, limit: 'unknown limit' },
    });
    await plans.approve(plan.id, 'test');
    const app = await buildDashboard({ runtime: d.h.runtime, token: new Secret(TOKEN), workspaces: ['acme'] });
    try {
      const cookie = await signIn(app);
      const headers = { host: HOST, cookie };
      const list = (await app.inject({ method: 'GET', url: '/plans', headers })).body;
      const _csrf = /name="_csrf" value="([^"]+)"/.exec(list)![1]!;
      const res = await app.inject({
        method: 'POST',
        url: `/plans/${plan.id}/apply`,
        headers: { ...headers, origin: ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
        payload: form({ _csrf }),
      });
      expect(res.statusCode).toBe(404);
      expect((await plans.require(plan.id)).status).toBe('approved');
    } finally {
      await app.close();
    }
  });
});
