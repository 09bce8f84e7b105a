import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planKey } from '../../src/keys/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Issue 33's "Done when", through the CLI as a person runs it, against the simulator over HTTP:
 * a workspace that requires approval, a plan of 200 renames among 300 contacts, a person who
 * renames 20 of them between plan and apply.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 300, workspace: { requireApproval: true } });
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

let started: Promise<unknown> | undefined;
/** The workspace's worker pool, started once for the file. */
const workers = () => (started ??= h.startWorkers());

interface PlanJson {
  planId: string;
  counts: Record<string, number>;
}
interface RunJson {
  id: string;
  status: string;
  counts: Record<string, number>;
  options: { plan?: string };
}

/** A plan of `n` renames (by id) of the contacts from `from` on; the new names by contact id. */
async function planRenames(from: number, n: number, tag: string) {
  const contacts = [...h.ws.contacts.values()].slice(from, from + n);
  const names = new Map(contacts.map((c, i) => [c.id, `${tag} ${i}`]));
  const file = h.file(
    `${tag}.csv`,
    csv(
      ['id', 'name'],
      contacts.map((c) => [c.id, names.get(c.id)!]),
    ),
  );
  const made = await cli(['plan', file, '--op', 'contact.update', '-w', 'acme', '--json']);
  expect(made.code, made.stderr).toBe(0);
  return { plan: JSON.parse(made.stdout) as PlanJson, contacts, names };
}

describe('change control: plan, approve, apply (issue 33)', () => {
  it('plan writes nothing; apply before approval exits 2; after it, 180 written and 20 drifted, none overwritten', async () => {
    expect(h.ws.contacts.size).toBe(300);
    const writesBefore = { ...h.ws.stats.writes };
    const { plan, contacts, names } = await planRenames(0, 200, 'Renamed');
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

  it('a discarded plan and an expired one are refused (exit 2, nothing sent)', async () => {
    const a = await planRenames(200, 5, 'Discarded');
    const b = await planRenames(205, 5, 'Expired');
    for (const id of [a.plan.planId, b.plan.planId]) expect((await cli(['plans', 'approve', id])).code).toBe(0);
    expect((await cli(['plans', 'discard', a.plan.planId])).code).toBe(0);
    // The plan's life ended: its expiry moved into the past.
    await h.runtime.redis.hset(planKey(h.config.prefix, 'acme', b.plan.planId), 'expiresMs', Date.now() - 1000);
    const before = h.ws.stats.requests;
    const discarded = await cli(['apply', a.plan.planId]);
    expect(discarded.code).toBe(2);
    expect(discarded.stderr).toMatch(/was discarded/);
    const expired = await cli(['apply', b.plan.planId]);
    expect(expired.code).toBe(2);
    expect(expired.stderr).toMatch(/expired at/);
    expect(h.ws.stats.requests).toBe(before);
    const listed = await cli(['plans', 'list', '--json']);
    const plans = (JSON.parse(listed.stdout) as { plans: Array<{ id: string; status: string; expired: boolean }> })
      .plans;
    expect(plans.find((p) => p.id === a.plan.planId)).toMatchObject({ status: 'discarded' });
    expect(plans.find((p) => p.id === b.plan.planId)).toMatchObject({ expired: true });
    const exported = await cli(['plans', 'export', b.plan.planId, '--out', '-']);
    expect(exported.stdout.trim().split('\n')).toHaveLength(6);
    expect(exported.stdout).toContain('Expired 0');
  }, 120_000);

  it('a deal.upsert plan predicts its creates, and apply makes them through the duplicate-safe create', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 4);
    const rows: Array<Array<string | number>> = deals.map((d, i) => [
      d.name,
      i < 2 ? d.value + 100 : d.value,
      d.status,
    ]);
    rows.push(['Planned new deal A', 10, 'won'], ['Planned new deal B', 20, 'in_progress']);
    const file = h.file('upsert.csv', csv(['name', 'value', 'status'], rows));
    const writes = { ...h.ws.stats.writes };
    const before = h.ws.deals.size;
    const firstValue = deals[0]!.value;
    const made = await cli(['plan', file, '--op', 'deal.upsert', '--match', 'name', '-w', 'acme', '--json']);
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson & { prediction: { writes: number; limit: string } };
    expect(plan.counts).toMatchObject({ create: 2, update: 2, skip: 2 });
    expect(plan.prediction).toMatchObject({ writes: 4, limit: 'unknown limit' });
    expect(h.ws.stats.writes).toEqual(writes);
    expect((await cli(['plans', 'approve', plan.planId])).code).toBe(0);
    await workers();
    const applied = await cli(['apply', plan.planId, '--wait', '--json'], { timeoutMs: 90_000 });
    expect(applied.code, applied.stderr).toBe(0);
    const run = JSON.parse(applied.stdout) as RunJson;
    expect(run.counts).toMatchObject({ total: 4, succeeded: 4, drifted: 0 });
    expect(h.ws.stats.writes.dealCreate - writes.dealCreate).toBe(2);
    expect(h.ws.stats.writes.dealUpdate - writes.dealUpdate).toBe(2);
    expect(h.ws.deals.size).toBe(before + 2);
    expect([...h.ws.deals.values()].filter((d) => d.name.startsWith('Planned new deal'))).toHaveLength(2);
    expect(h.ws.deals.get(deals[0]!.id)!.value).toBe(firstValue + 100);
  }, 120_000);
});
