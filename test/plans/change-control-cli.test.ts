import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';
import { planRenames, startChangeControlHarness, type RunJson } from './change-control-fixture.js';

/*
 * Issue 33's "Done when", through the CLI as a person runs it, against the simulator over HTTP:
 * a workspace that requires approval, a plan of 200 renames among 300 contacts, a person who
 * renames 20 of them between plan and apply. Refused plans and a deal.upsert plan:
 * change-control-refusals.test.ts.
 */

let h: Harness;
beforeAll(async () => {
  h = await startChangeControlHarness();
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

let started: Promise<unknown> | undefined;
/** The workspace's worker pool, started once for the file. */
const workers = () => (started ??= h.startWorkers());

describe('change control: plan, approve, apply (issue 33)', () => {
  it('plan writes nothing; apply before approval exits 2; after it, 180 written and 20 drifted, none overwritten', async () => {
    expect(h.ws.contacts.size).toBe(300);
    const writesBefore = { ...h.ws.stats.writes };
    const { plan, contacts, names } = await planRenames(h, 0, 200, 'Renamed');
    expect(plan.planId).toMatch(/^plan-/);
    expect(plan.counts).toMatchObject({ update: 200, create: 0, skip: 0, 'not-found': 0, ambiguous: 0, invalid: 0 });
    expect(h.ws.stats.writes).toEqual(writesBefore);

    // A person renames 20 of the 200 records between plan and apply.
    const edited = contacts.slice(0, 200).filter((_, i) => i % 10 === 3);
    expect(edited).toHaveLength(20);
    for (const c of edited) h.ws.updateRecord('contacts', c.id, { name: `Person ${c.id}` });

    const shown = await cli(['plans', 'show', plan.planId, '--rows', '3']);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/status: pending/);
    expect(shown.stdout).toMatch(/name: ".*" -> "Renamed 0"/);

    await workers();
    const requestsBefore = h.ws.stats.requests;
    const early = await cli(['apply', plan.planId, '--wait']);
    expect(early.code).toBe(2);
    expect(early.stderr).toMatch(/not approved.*requireApproval.*plans approve/s);
    expect(early.stderr).toContain('Nothing was sent');
    expect(h.ws.stats.requests).toBe(requestsBefore);
    expect(h.ws.stats.writes).toEqual(writesBefore);

    const approved = await cli(['plans', 'approve', plan.planId]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(/approved by cli:/);

    const applied = await cli(['apply', plan.planId, '--wait', '--json'], { timeoutMs: 90_000 });
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.options.plan).toBe(plan.planId);
    expect(h.ws.stats.writes.contactUpdate - writesBefore.contactUpdate).toBe(180);
    for (const c of contacts) {
      const now = h.ws.contacts.get(c.id)!.name;
      if (edited.includes(c)) expect(now).toBe(`Person ${c.id}`);
      else expect(now).toBe(names.get(c.id));
    }

    const shownRun = await cli(['runs', 'show', run.id, '--json']);
    const counts = (JSON.parse(shownRun.stdout) as { run: RunJson }).run.counts;
    expect(counts).toMatchObject({ total: 200, succeeded: 180, drifted: 20, failed: 0, queued: 0 });
    // Drifted rows need a person: the run's exit code says so.
    expect(applied.code).toBe(1);
    // Each drifted row shows the CRM's current value; a retry says to re-plan them.
    const text = await cli(['runs', 'show', run.id, '--problems', '50']);
    expect(text.stdout).toMatch(/20 drifted/);
    expect(text.stdout).toContain(
      `drifted: not sent: the record changed since the plan: name is now "Person ${edited[0]!.id}"`,
    );
    // A retry re-plans the drifted rows against the CRM's values now (the person's names are the
    // new before-values), sends nothing, and names the commands; approved and applied, it writes them.
    const listBefore = h.ws.stats.listPages;
    const writesBeforeRetry = h.ws.stats.writes.contactUpdate;
    const retried = await cli(['runs', 'retry', run.id]);
    expect(retried.code, retried.stderr).toBe(0);
    const replanned = /re-planned .*: plan (plan-\S+): /.exec(retried.stdout)?.[1];
    expect(retried.stdout, retried.stdout).toMatch(
      /^20 drifted rows of run \S+ re-planned against the CRM's values now/,
    );
    expect(retried.stdout).toContain(
      `approve: crm-sync plans approve ${replanned}   apply: crm-sync apply ${replanned} --wait`,
    );
    expect(h.ws.stats.writes.contactUpdate).toBe(writesBeforeRetry);
    // The CRM's list read once, in pages, never one request per row.
    expect(h.ws.stats.listPages - listBefore).toBeLessThanOrEqual(5);
    const shownPlan = await cli(['plans', 'show', replanned!, '--json']);
    const again = JSON.parse(shownPlan.stdout) as {
      plan: { counts: Record<string, number>; rows: number };
      rows: Array<{ recordId: string; before: Record<string, string>; fields: Record<string, string> }>;
    };
    expect(again.plan).toMatchObject({ rows: 20, counts: { update: 20 } });
    for (const r of again.rows) {
      expect(r.before).toEqual({ name: `Person ${r.recordId}` });
      expect(r.fields.name).toBe(names.get(r.recordId));
    }
    expect((await cli(['plans', 'approve', replanned!])).code).toBe(0);
    const reapplied = await cli(['apply', replanned!, '--wait', '--json']);
    expect(reapplied.code, reapplied.stderr).toBe(0);
    expect((JSON.parse(reapplied.stdout) as RunJson).counts).toMatchObject({ total: 20, succeeded: 20, drifted: 0 });
    for (const c of edited) expect(h.ws.contacts.get(c.id)!.name).toBe(names.get(c.id));

    // Applied once: a second apply is refused, and sends nothing.
    const requestsAfter = h.ws.stats.requests;
    const twice = await cli(['apply', plan.planId, '--wait']);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toMatch(/already applied by run/);
    expect(h.ws.stats.requests).toBe(requestsAfter);
  }, 180_000);
});
