import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDefinitions, runSync, type SyncDefinition, type SyncSummary } from '../../src/schedule/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { writes } from '../reconcile/fixtures.js';

/**
 * The guard of a nightly sync (issue 33, item 5): a tick whose plan goes over it is planned,
 * not applied — recorded with why, the plan kept as a CSV, the notify URL told with the counts
 * and the top fields — against the simulator over HTTP with real workers and Redis.
 */
describe('a guarded nightly sync', () => {
  let h: Harness;
  let hook: Server;
  let hookUrl: string;
  let jobs: string;
  const received: SyncSummary[] = [];

  beforeAll(async () => {
    h = await startHarness({ records: 60, seed: 9 });
    await h.startWorkers();
    jobs = join(h.dir, 'jobs');
    mkdirSync(jobs);
    mkdirSync(join(h.dir, 'data'));
    writeFileSync(
      join(h.dir, 'data', 'clear-mapping.json'),
      JSON.stringify({ columns: { Email: 'email', Phone: { field: 'phone_number', emptyCells: 'clear' } } }),
    );
    writeFileSync(
      join(h.dir, 'data', 'plain-mapping.json'),
      JSON.stringify({ columns: { Email: 'email', Phone: 'phone_number' } }),
    );
    hook = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        received.push(JSON.parse(body) as SyncSummary);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    await new Promise((resolve) => hook?.close(resolve));
    await h?.close();
  });

  /** The contacts as a CSV of Email, Phone; `phone(i, current)` gives row i's phone. */
  function source(name: string, phone: (i: number, current: string) => string): string {
    const rows = [...h.ws.contacts.values()].map((c, i) => [c.email, phone(i, c.phone_number)]);
    writeFileSync(join(h.dir, 'data', name), csv(['Email', 'Phone'], rows));
    return `../data/${name}`;
  }

  function define(name: string, extra: Record<string, unknown>): SyncDefinition {
    writeFileSync(
      join(jobs, `${name}.json`),
      JSON.stringify({
        name,
        workspace: 'acme',
        operation: 'contact.update',
        matchKey: 'email',
        keyColumn: 'Email',
        schedule: { cron: '0 2 * * *' },
        options: { notifyUrl: hookUrl },
        ...extra,
      }),
    );
    return loadDefinitions(jobs).find((d) => d.name === name)!;
  }

  const phones = () => new Map([...h.ws.contacts.values()].map((c) => [c.id, c.phone_number]));
  const lastHook = async (sync: string) => {
    for (let i = 0; i < 100 && !received.some((s) => s.sync === sync); i++) await new Promise((r) => setTimeout(r, 20));
    return received.filter((s) => s.sync === sync).at(-1)!;
  };

  it('holds a tick whose source came back with 60 % of a field blank (maxCleared): nothing sent, the hook says why', async () => {
    const blank = (i: number) => i % 10 < 6;
    const file = source('blank-phones.csv', (i, current) => (blank(i) ? '' : current));
    const wouldClear = [...h.ws.contacts.values()].filter((c, i) => blank(i) && c.phone_number !== '').length;
    expect(wouldClear).toBeGreaterThan(20);
    const def = define('blank-phones', {
      source: file,
      mapping: '../data/clear-mapping.json',
      guard: { maxCleared: 20 },
    });
    const before = phones();
    h.ws.resetStats();
    const summary = await runSync(def, { runtime: h.runtime });

    expect(writes(h)).toBe(0);
    expect(phones()).toEqual(before);
    expect(summary).toMatchObject({ status: 'completed', skipped: false, counts: { total: 0 } });
    expect(summary.held).toMatchObject({
      rows: 60,
      clearedRows: wouldClear,
      changedRows: wouldClear,
      topCleared: [{ field: 'phone_number', rows: wouldClear }],
      topChanged: [{ field: 'phone_number', rows: wouldClear }],
      counts: { update: wouldClear, skip: 60 - wouldClear },
    });
    expect(summary.held?.reasons).toEqual([
      `${wouldClear} rows would empty a field, over maxCleared 20; emptied: phone_number ${wouldClear}`,
    ]);
    expect(summary.reason).toMatch(
      /^held as plan plan-\S+ awaiting approval: \d+ rows would empty a field, over maxCleared 20; .* Nothing was sent\. Review it: crm-sync plans show plan-\S+ .*; as CSV: /,
    );
    const run = await h.runtime.store.requireRun(summary.runId);
    expect(run).toMatchObject({ status: 'completed', syncName: 'blank-phones', reason: summary.reason });
    // The plan, as reconcile --out writes it: every row, before -> after.
    const planFile = summary.held!.planFile!;
    expect(existsSync(planFile)).toBe(true);
    const plan = readFileSync(planFile, 'utf8').trim().split('\n');
    expect(plan).toHaveLength(61);
    expect(plan.filter((l) => /,update,.*phone_number: [^,]+ -> ,/.test(l))).toHaveLength(wouldClear);
    const hooked = await lastHook('blank-phones');
    expect(hooked.held).toMatchObject({
      clearedRows: wouldClear,
      topCleared: [{ field: 'phone_number', rows: wouldClear }],
    });
    expect(hooked.reason).toBe(summary.reason);

    // Without "clear" (the default "skip"), the same blank source changes nothing: the guard lets it through.
    const skip = define('blank-phones-skip', {
      source: file,
      mapping: '../data/plain-mapping.json',
      guard: { maxCleared: 20 },
    });
    const passed = await runSync(skip, { runtime: h.runtime });
    expect(passed.held).toBeUndefined();
    expect(passed.counts).toMatchObject({ total: 60, skipped: 60, succeeded: 0 });
    expect(writes(h)).toBe(0);
  });

  it('holds a tick that changes too large a share (maxChangedShare); a smaller one is applied as before', async () => {
    const many = define('many-changes', {
      source: source('many.csv', (i, current) => (i % 2 === 0 ? `+1 555-000-${String(i).padStart(4, '0')}` : current)),
      mapping: '../data/plain-mapping.json',
      guard: { maxChangedShare: 0.2 },
    });
    const before = phones();
    h.ws.resetStats();
    const held = await runSync(many, { runtime: h.runtime });
    expect(writes(h)).toBe(0);
    expect(phones()).toEqual(before);
    expect(held.held).toMatchObject({
      rows: 60,
      changedRows: 30,
      changedShare: 0.5,
      topChanged: [{ field: 'phone_number', rows: 30 }],
    });
    expect(held.held?.reasons).toEqual([
      '30 of 60 rows would change (50 %), over maxChangedShare 0.2 (20 %); most changed: phone_number 30',
    ]);
    expect((await lastHook('many-changes')).held?.changedRows).toBe(30);

    const few = define('few-changes', {
      source: source('few.csv', (i, current) => (i % 10 === 0 ? `+1 555-111-${String(i).padStart(4, '0')}` : current)),
      mapping: '../data/plain-mapping.json',
      guard: { maxChangedShare: 0.2, maxCleared: 0 },
    });
    const applied = await runSync(few, { runtime: h.runtime });
    expect(applied.held).toBeUndefined();
    expect(applied.reason).toBeUndefined();
    expect(applied.counts).toMatchObject({ total: 60, succeeded: 6, skipped: 54 });
    expect(h.ws.stats.writes.contactUpdate).toBe(6);
    // No plan file is left behind for a tick that was applied.
    expect(readdirSync(h.config.resultsDir).filter((f) => f.startsWith('few-changes-'))).toEqual([]);
  });

  it('"approval": "always" holds every tick; --override-guard applies it', async () => {
    const def = define('always-held', {
      source: source('always.csv', (i, current) => (i === 1 ? '+1 555-222-0001' : current)),
      mapping: '../data/plain-mapping.json',
      approval: 'always',
    });
    h.ws.resetStats();
    const held = await runSync(def, { runtime: h.runtime });
    expect(writes(h)).toBe(0);
    expect(held.held).toMatchObject({
      changedRows: 1,
      reasons: ['the sync asks for approval of every tick ("approval": "always")'],
    });
    const applied = await runSync(def, { runtime: h.runtime, overrideGuard: true });
    expect(applied.held).toBeUndefined();
    expect(applied.counts).toMatchObject({ succeeded: 1, skipped: 59 });
    expect([...h.ws.contacts.values()][1]?.phone_number).toBe('+1 555-222-0001');
  });

  it('a definition names what is wrong with a guard', () => {
    writeFileSync(
      join(jobs, 'bad.json'),
      JSON.stringify({
        name: 'bad',
        workspace: 'acme',
        operation: 'contact.update',
        source: 'x.csv',
        schedule: { cron: '0 2 * * *' },
        guard: { maxChangedShare: 1.5 },
      }),
    );
    expect(() => loadDefinitions(jobs)).toThrow(/guard\.maxChangedShare: must be 1 or less/);
    writeFileSync(
      join(jobs, 'bad.json'),
      JSON.stringify({
        name: 'bad',
        workspace: 'acme',
        operation: 'contact.update',
        source: 'x.csv',
        schedule: { cron: '0 2 * * *' },
        guard: {},
        approval: 'sometimes',
      }),
    );
    expect(() => loadDefinitions(jobs)).toThrow(
      /guard: set maxChangedShare, maxCleared or both; approval: must be "guard" or "always"/,
    );
    rmSync(join(jobs, 'bad.json'));
  });
});
