import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CrmClient } from '../../src/crm/index.js';
import { silentLogger } from '../../src/log/index.js';
import { applyPlan, PlanStore } from '../../src/plans/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { loadDefinitions, runSync, type SyncDefinition, type SyncSummary } from '../../src/schedule/index.js';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { HOST, signIn, TOKEN } from '../dashboard/dashboard-fixture.js';
import { cliFor } from '../helpers/run-cli.js';
import { writes } from '../reconcile/fixtures.js';

/**
 * A guarded nightly sync's tick is a stored plan (issue 33, item 5): held over the guard as a
 * plan awaiting approval (the run, the plan and the hook name it and the commands), applied at
 * once within the guard from that one plan (one read of the source, one list pass of the tick's
 * own), and a newer tick discards the plan an earlier one left waiting. Against the simulator
 * over HTTP with real workers and Redis; approve and apply through the CLI as an operator would.
 */

interface Fixture {
  h: Harness;
  jobs: string;
  hookUrl: string;
  received: SyncSummary[];
  hook: Server;
}

async function startFixture(workspace?: Record<string, unknown>): Promise<Fixture> {
  // The default drift window (10 s): ticks here are applied seconds after an earlier apply wrote
  // the same records, and a run's first check reads the list anew, so none of those writes is
  // taken for drift (DriftCheck.#runStart).
  const h = await startHarness({ records: 60, seed: 11, ...(workspace ? { workspace } : {}) });
  await h.startWorkers();
  const jobs = join(h.dir, 'jobs');
  mkdirSync(jobs);
  mkdirSync(join(h.dir, 'data'));
  writeFileSync(
    join(h.dir, 'data', 'mapping.json'),
    JSON.stringify({ columns: { Email: 'email', Phone: 'phone_number' } }),
  );
  const received: SyncSummary[] = [];
  const hook = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push(JSON.parse(body) as SyncSummary);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
  const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  return { h, jobs, hookUrl, received, hook };
}

async function stopFixture(f: Fixture | undefined): Promise<void> {
  if (!f) return;
  await new Promise((resolve) => f.hook.close(resolve));
  await f.h.close();
}

/** The contacts as a CSV of Email, Phone; `phone(i, current)` gives row i's phone. Written whole, then renamed in place. */
function source(f: Fixture, name: string, phone: (i: number, current: string) => string): string {
  const rows = [...f.h.ws.contacts.values()].map((c, i) => [c.email, phone(i, c.phone_number)]);
  const path = join(f.h.dir, 'data', name);
  writeFileSync(`${path}.new`, csv(['Email', 'Phone'], rows));
  renameSync(`${path}.new`, path);
  return `../data/${name}`;
}

function define(f: Fixture, name: string, extra: Record<string, unknown>): SyncDefinition {
  writeFileSync(
    join(f.jobs, `${name}.json`),
    JSON.stringify({
      name,
      workspace: 'acme',
      operation: 'contact.update',
      matchKey: 'email',
      keyColumn: 'Email',
      mapping: '../data/mapping.json',
      schedule: { cron: '0 2 * * *' },
      options: { notifyUrl: f.hookUrl },
      ...extra,
    }),
  );
  return loadDefinitions(f.jobs).find((d) => d.name === name)!;
}

async function lastHook(f: Fixture, sync: string, count = 1): Promise<SyncSummary> {
  for (let i = 0; i < 150 && f.received.filter((s) => s.sync === sync).length < count; i++)
    await new Promise((r) => setTimeout(r, 20));
  return f.received.filter((s) => s.sync === sync).at(-1)!;
}

const phones = (h: Harness) => new Map([...h.ws.contacts.values()].map((c) => [c.id, c.phone_number]));
const newPhone = (tag: string, i: number) => `+1 555-${tag}-${String(i).padStart(4, '0')}`;

describe('a guarded sync tick is a stored plan', () => {
  let f: Fixture;
  const cli = cliFor(() => f.h);
  const plans = () => new PlanStore({ redis: f.h.runtime.redis, prefix: f.h.config.prefix });

  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(async () => stopFixture(f));

  it('a held tick is a pending plan named by the run, the plan and the hook; plans approve then apply writes exactly its rows, with the drift check, as a run of the sync', async () => {
    const { h } = f;
    const file = source(f, 'held.csv', (i, current) => (i % 2 === 0 ? newPhone('300', i) : current));
    const def = define(f, 'held-sync', { source: file, guard: { maxChangedShare: 0.2 } });
    const before = phones(h);
    h.ws.resetStats();
    const summary = await runSync(def, { runtime: h.runtime });
    expect(writes(h)).toBe(0);
    expect(phones(h)).toEqual(before);

    const planId = summary.held?.planId;
    expect(planId).toMatch(/^plan-/);
    expect(summary.planId).toBe(planId);
    expect(summary.held?.commands).toEqual({
      review: `crm-sync plans show ${planId}`,
      approve: `crm-sync plans approve ${planId}`,
      apply: `crm-sync apply ${planId} --wait`,
      discard: `crm-sync plans discard ${planId}`,
    });
    expect(summary.reason).toContain(`held as plan ${planId} awaiting approval: 30 of 60 rows would change (50 %)`);
    expect(summary.reason).toContain(`crm-sync plans approve ${planId}, then crm-sync apply ${planId} --wait`);
    expect(summary.reason).toContain(`crm-sync plans discard ${planId}`);
    const heldRun = await h.runtime.store.requireRun(summary.runId);
    expect(heldRun).toMatchObject({ status: 'completed', syncName: 'held-sync', reason: summary.reason });
    expect(heldRun.counts.total).toBe(0);

    const plan = await plans().require(planId!);
    expect(plan).toMatchObject({
      status: 'pending',
      syncName: 'held-sync',
      reason: summary.reason,
      rows: 60,
      counts: { update: 30, skip: 30 },
    });
    const hooked = await lastHook(f, 'held-sync');
    expect(hooked.held?.planId).toBe(planId);
    expect(hooked.held?.commands?.approve).toBe(`crm-sync plans approve ${planId}`);
    expect(hooked.reason).toBe(summary.reason);

    // The source moves on (every row changed now) and a person edits one planned record: the
    // plan, not the source, is what is applied, and the edited record is left to the person.
    source(f, 'held.csv', (i) => newPhone('999', i));
    const planned = [...h.ws.contacts.values()].filter((_, i) => i % 2 === 0);
    const edited = planned[3]!;
    h.ws.updateRecord('contacts', edited.id, { phone_number: '+1 555-777-7777' });

    const approved = await cli(['plans', 'approve', planId!]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toContain(`plan ${planId} approved`);
    h.ws.resetStats();
    const applied = await cli(['apply', planId!, '--wait', '--json']);
    expect(applied.code, applied.stderr).toBe(1);
    const run = JSON.parse(applied.stdout) as { id: string; syncName?: string; counts: Record<string, number> };
    expect(run.syncName).toBe('held-sync');
    expect(run.counts).toMatchObject({ total: 60, succeeded: 29, drifted: 1, skipped: 30, failed: 0 });
    expect(h.ws.stats.writes.contactUpdate).toBe(29);
    for (const [i, c] of [...h.ws.contacts.values()].entries()) {
      if (c.id === edited.id) expect(c.phone_number).toBe('+1 555-777-7777');
      else expect(c.phone_number).toBe(i % 2 === 0 ? newPhone('300', i) : before.get(c.id));
    }
    expect(await plans().require(planId!)).toMatchObject({ status: 'applied', runId: run.id });
  });

  it('a tick within the guard applies its plan at once: one read of the source and one list pass of its own, what was planned is what is written', async () => {
    const { h } = f;
    const file = source(f, 'within.csv', (i, current) => (i % 10 === 0 ? newPhone('400', i) : current));
    const def = define(f, 'within-sync', { source: file, guard: { maxChangedShare: 0.2 } });
    const before = phones(h);
    // The tick's own client, counting its list passes; at the first page the source file is
    // replaced by one that changes every row: a second read of the source would see it.
    const client: CrmClient = createCrmClient(h.config, 'acme', silentLogger);
    let passes = 0;
    const pages = client.pages.bind(client);
    client.pages = ((...args: Parameters<CrmClient['pages']>) => {
      passes++;
      if (passes === 1) source(f, 'within.csv', (i) => newPhone('888', i));
      return pages(...args);
    }) as CrmClient['pages'];
    h.ws.resetStats();
    try {
      const summary = await runSync(def, { runtime: h.runtime, client });
      expect(summary.held).toBeUndefined();
      expect(summary.reason).toBeUndefined();
      expect(summary.plan).toMatchObject({ update: 6, skip: 54 });
      expect(summary.counts).toMatchObject({ total: 60, succeeded: 6, skipped: 54, failed: 0 });
      expect(passes).toBe(1);
      expect(h.ws.stats.writes.contactUpdate).toBe(6);
      for (const [i, c] of [...h.ws.contacts.values()].entries())
        expect(c.phone_number).toBe(i % 10 === 0 ? newPhone('400', i) : before.get(c.id));
      const run = await h.runtime.store.requireRun(summary.runId);
      expect(run).toMatchObject({ syncName: 'within-sync', options: { plan: summary.planId } });
      expect(run.source).toMatch(/^plan plan-/);
      expect(await plans().require(summary.planId!)).toMatchObject({
        status: 'applied',
        syncName: 'within-sync',
        runId: run.id,
      });
    } finally {
      client.close();
    }
  });

  it('"approval": "always" holds every tick; a newer tick discards the plan still waiting and says so; --override-guard applies its plan in the approver\'s name', async () => {
    const { h } = f;
    const def = define(f, 'always-sync', {
      source: source(f, 'always.csv', (i, current) => (i === 2 ? newPhone('500', i) : current)),
      approval: 'always',
    });
    h.ws.resetStats();
    const first = await runSync(def, { runtime: h.runtime });
    expect(first.held?.reasons).toEqual(['the sync asks for approval of every tick ("approval": "always")']);
    const older = first.held!.planId!;
    expect(first.supersededPlan).toBeUndefined();

    const second = await runSync(def, { runtime: h.runtime });
    const newer = second.held!.planId!;
    expect(newer).not.toBe(older);
    expect(second.supersededPlan).toBe(older);
    expect(second.held?.supersededPlan).toBe(older);
    expect(second.reason).toContain(`The earlier plan ${older} of this sync, still waiting, was discarded`);
    const hooked = await lastHook(f, 'always-sync', 2);
    expect(hooked.supersededPlan).toBe(older);
    expect(await plans().require(older)).toMatchObject({
      status: 'discarded',
      reason: `discarded: a newer tick of sync always-sync made plan ${newer}, which replaces it and waits for approval in its place`,
    });
    expect(await plans().require(newer)).toMatchObject({ status: 'pending' });
    const shown = await cli(['plans', 'show', older]);
    expect(shown.stdout).toContain(`discarded: a newer tick of sync always-sync made plan ${newer}`);
    expect(writes(h)).toBe(0);

    const applied = await runSync(def, { runtime: h.runtime, overrideGuard: true, approver: 'cli:ops@test' });
    expect(applied.held).toBeUndefined();
    expect(applied.supersededPlan).toBe(newer);
    expect(applied.counts).toMatchObject({ succeeded: 1, skipped: 59 });
    expect([...h.ws.contacts.values()][2]?.phone_number).toBe(newPhone('500', 2));
    expect(await plans().require(applied.planId!)).toMatchObject({
      status: 'applied',
      approval: { by: 'cli:ops@test' },
    });
    expect(await plans().require(newer)).toMatchObject({
      status: 'discarded',
      reason: `discarded: a newer tick of sync always-sync made plan ${applied.planId}, which was applied in its place`,
    });
  });
});

describe('a held tick reads as held wherever a person looks (issue 46, item 1)', () => {
  let f: Fixture;
  const cli = cliFor(() => f.h);

  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(async () => stopFixture(f));

  it('schedule run exits HELD (7) with short lines; runs list, runs show and the dashboard say held, count the file, link the plan; once applied, say so', async () => {
    const { h } = f;
    const file = source(f, 'shown.csv', (i, current) => (i % 2 === 0 ? newPhone('310', i) : current));
    define(f, 'shown-sync', { source: file, guard: { maxChangedShare: 0.2 } });
    h.ws.resetStats();
    const ran = await cli(['schedule', 'run', 'shown-sync', '--jobs-dir', f.jobs]);
    expect(ran.code, ran.stderr).toBe(7);
    expect(writes(h)).toBe(0);
    const lines = ran.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^sync shown-sync: HELD for approval, nothing sent \(run \S+, [\d.]+ s\)$/);
    expect(ran.stdout).toContain('  why: 30 of 60 rows would change (50 %), over maxChangedShare 0.2');
    const planId = /crm-sync plans approve (plan-\S+)/.exec(ran.stdout)?.[1];
    expect(planId).toBeDefined();
    expect(ran.stdout).toContain(`  apply:   crm-sync apply ${planId} --wait`);
    for (const line of lines) expect(line.length).toBeLessThan(200);
    const runId = /\(run (\S+),/.exec(lines[0]!)![1]!;

    const listed = await cli(['runs', 'list', '--sync', 'shown-sync', '--limit', '5']);
    const line = listed.stdout.split('\n').find((l) => l.startsWith(runId))!;
    expect(line).toMatch(/ held {5}/);
    expect(line).toContain(`held: 60 rows planned in plan ${planId}, nothing sent`);

    const shown = await cli(['runs', 'show', runId]);
    expect(shown.code).toBe(7);
    expect(shown.stdout).toContain('  status: held');
    expect(shown.stdout).toContain(
      `rows: none of its own, nothing sent — held for approval: the source has 60 data rows, planned in plan ${planId}`,
    );
    expect(shown.stdout).not.toContain('the file has 0 data rows');

    // The dashboard over the same Redis: the list, the run page and the plan page.
    const app = await buildDashboard({ runtime: h.runtime, token: new Secret(TOKEN) });
    try {
      const browser = { host: HOST, cookie: await signIn(app) };
      const list = await app.inject({ method: 'GET', url: '/', headers: browser });
      const row = list.body.split('<tr>').find((r) => r.includes(runId))!;
      expect(row).toContain('>Held</span>');
      expect(row).toContain(`href="/plans/${planId}"`);
      expect(row).not.toContain('none yet');
      const runPage = await app.inject({ method: 'GET', url: `/runs/${runId}`, headers: browser });
      expect(runPage.body).toContain('Held for approval: this tick of sync “shown-sync” sent nothing.');
      expect(runPage.body).toContain('Its source has 60 data rows, planned in plan');
      expect(runPage.body).toContain(`Now: plan ${planId} awaits approval: nothing sent yet.`);
      expect(runPage.body).toContain('30 of 60 rows would change (50 %)');
      expect(runPage.body).toContain(`>Review the plan</a>`);
      const planPage = await app.inject({ method: 'GET', url: `/plans/${planId}`, headers: browser });
      expect(planPage.body).toContain('Made by a tick of nightly sync “shown-sync”, held for approval.');

      // A second tick discards this plan; its own is what an operator applies.
      const json = await cli(['schedule', 'run', 'shown-sync', '--jobs-dir', f.jobs, '--json']);
      expect(json.code, json.stderr).toBe(7);
      expect((JSON.parse(json.stdout) as SyncSummary).held?.rows).toBe(60);
      const secondPlan = (JSON.parse(json.stdout) as SyncSummary).held!.planId!;
      const secondRun = (JSON.parse(json.stdout) as SyncSummary).runId;
      const gone = await cli(['runs', 'show', runId]);
      expect(gone.stdout).toContain(`(held for approval; since then plan ${planId} was discarded`);
      expect((await cli(['plans', 'approve', secondPlan])).code).toBe(0);
      const applied = await cli(['apply', secondPlan, '--wait', '--json']);
      expect(applied.code, applied.stderr).toBe(0);
      const appliedRun = (JSON.parse(applied.stdout) as { id: string }).id;
      const after = await cli(['runs', 'show', secondRun]);
      expect(after.stdout).toContain(
        `(held for approval; since then plan ${secondPlan} was applied as run ${appliedRun})`,
      );
      expect(after.stdout).not.toContain('awaiting approval');
      const afterPage = await app.inject({ method: 'GET', url: `/runs/${secondRun}`, headers: browser });
      expect(afterPage.body).toContain(`Now: plan ${secondPlan} was applied as run ${appliedRun}.`);
      expect(afterPage.body).not.toContain('>Review the plan</a>');
    } finally {
      await app.close();
    }
  }, 150_000);
});

describe('a guarded tick applied from its plan keeps maxFailures', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(async () => stopFixture(f));

  it('stops once maxFailures rows matched nothing: the rest is not sent, as a reconciled tick stops', async () => {
    const { h } = f;
    const contacts = [...h.ws.contacts.values()];
    const rows = [
      ...Array.from({ length: 4 }, (_, i) => [`ghost${i}@nowhere.example`, '+1 555-000-0000']),
      ...contacts.slice(0, 20).map((c, i) => [c.email, newPhone('700', i)]),
    ];
    writeFileSync(join(h.dir, 'data', 'ghosts.csv'), csv(['Email', 'Phone'], rows));
    const def = define(f, 'ghosts', {
      source: '../data/ghosts.csv',
      guard: { maxChangedShare: 1 },
      options: { maxFailures: 3, notifyUrl: f.hookUrl },
    });
    h.ws.resetStats();
    const summary = await runSync(def, { runtime: h.runtime, pollMs: 50 });
    expect(summary.held).toBeUndefined();
    expect(summary.status).toBe('failed');
    expect(summary.reason).toMatch(/^aborted: \d+ rows (matched no record or several|failed) \(maxFailures 3\)$/);
    expect(writes(h)).toBe(0);
    const results = await h.runtime.store.problems(summary.runId, { limit: 100 });
    expect(results.rows.filter((r) => r.code === 'RUN_ABORTED')).toHaveLength(20);
    expect(results.rows.filter((r) => r.code === 'CRM_NOT_FOUND')).toHaveLength(4);
    expect(summary.failedRowsFile).toBeDefined();
  });
});

describe('a sync of a workspace that requires approval', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await startFixture({ requireApproval: true });
  });
  afterAll(async () => stopFixture(f));

  it('holds every tick as a plan, even without a guard; the plan applies once approved', async () => {
    const { h } = f;
    const def = define(f, 'approved-sync', {
      source: source(f, 'approved.csv', (i, current) => (i < 3 ? newPhone('600', i) : current)),
    });
    h.ws.resetStats();
    const summary = await runSync(def, { runtime: h.runtime });
    expect(writes(h)).toBe(0);
    expect(summary.held?.reasons).toEqual([
      'workspace "acme" requires approval of every plan ("requireApproval": true)',
    ]);
    const planId = summary.held!.planId!;
    const plans = new PlanStore({ redis: h.runtime.redis, prefix: h.config.prefix });
    const apply = () =>
      applyPlan({ plans, store: h.runtime.store, queue: h.runtime.queue('acme'), planId, requireApproval: true });
    await expect(apply()).rejects.toThrow(/is not approved/);
    expect((await plans.approve(planId, 'cli:ops@test')).ok).toBe(true);
    const { run } = await apply();
    const done = await h.waitForRun(run.id);
    expect(done).toMatchObject({ status: 'completed', syncName: 'approved-sync' });
    expect(done.counts).toMatchObject({ total: 60, succeeded: 3, skipped: 57 });
    expect(h.ws.stats.writes.contactUpdate).toBe(3);
  });
});
