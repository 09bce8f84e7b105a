import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { createTestSchema, urlWithPassword, type TestSchema } from '../helpers/postgres.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * `crm-sync plan` reads what `import` reads: stdin (`-`) and a PostgreSQL query (`--query`),
 * through the CLI as a person runs it, against the simulator over HTTP and a real PostgreSQL
 * (its own schema, dropped at the end). The plan stores its rows, so apply needs neither the
 * pipe nor the database again.
 */

const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;

let h: Harness;
let db: TestSchema;
beforeAll(async () => {
  h = await startHarness({ records: 20 });
  db = await createTestSchema('plan');
});
afterAll(async () => {
  await db?.drop();
  await h?.close();
});

const cli = cliFor(() => h);

let started: Promise<unknown> | undefined;
const workers = () => (started ??= h.startWorkers());

interface PlanJson {
  planId: string;
  counts: Record<string, number>;
}
interface PlanShown {
  plan: { id: string; source: string; rows: number; counts: Record<string, number> };
  rows: Array<{ row: number; ref?: string; action: string; recordId?: string }>;
}
interface RunJson {
  id: string;
  counts: Record<string, number>;
}

async function shown(planId: string): Promise<PlanShown> {
  const out = await cli(['plans', 'show', planId, '--json', '--rows', '50']);
  expect(out.code, out.stderr).toBe(0);
  return JSON.parse(out.stdout) as PlanShown;
}

async function apply(planId: string): Promise<RunJson> {
  await workers();
  const applied = await cli(['apply', planId, '--wait', '--json'], { timeoutMs: 90_000 });
  expect(applied.code, applied.stderr).toBe(0);
  // Nobody approved these plans: said where it happens, since this workspace does not require it.
  expect(applied.stderr).toContain(
    `plan ${planId} is not approved: workspace "acme" does not require approval ("requireApproval": false), so it is applied as it is`,
  );
  return JSON.parse(applied.stdout) as RunJson;
}

describe('crm-sync plan - (stdin)', () => {
  it('plans NDJSON from stdin; apply sends exactly the plan', async () => {
    // Copies: the simulator's deals change in place.
    const [a, b] = [...h.ws.deals.values()].map((d) => ({ ...d }));
    const ndjson = [
      { name: a!.name, value: a!.value + 5 }, // update
      { name: b!.name, value: b!.value }, // unchanged
      { name: 'Stdin planned deal', value: 31 }, // create
    ]
      .map((r) => JSON.stringify(r))
      .join('\n');
    const writes = { ...h.ws.stats.writes };
    const made = await cli(['plan', '-', '--op', 'deal.upsert', '--match', 'name', '-w', 'acme', '--json'], {
      input: ndjson,
    });
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect(plan.counts).toMatchObject({ update: 1, skip: 1, create: 1, invalid: 0 });
    expect(h.ws.stats.writes).toEqual(writes); // a plan sends nothing
    const view = await shown(plan.planId);
    expect(view.plan.source).toMatch(/stdin/);
    expect(view.plan.rows).toBe(3);
    expect(view.rows.map((r) => r.action)).toEqual(['update', 'skip', 'create']);

    const run = await apply(plan.planId);
    expect(run.counts).toMatchObject({ total: 2, succeeded: 2, drifted: 0 });
    expect(h.ws.deals.get(a!.id)!.value).toBe(a!.value + 5);
    expect(h.ws.deals.get(b!.id)!.updated_at).toBe(b!.updated_at);
    expect([...h.ws.deals.values()].filter((d) => d.name === 'Stdin planned deal')).toHaveLength(1);
  }, 120_000);

  it('plans CSV from stdin with --format csv; a row with a bad cell is planned invalid (exit 1)', async () => {
    const contacts = [...h.ws.contacts.values()].slice(0, 2).map((c) => ({ ...c }));
    const text = csv(
      ['id', 'name', 'email'],
      [
        [contacts[0]!.id, 'Piped Rename', contacts[0]!.email],
        [contacts[1]!.id, contacts[1]!.name, 'not-an-email'],
      ],
    );
    const made = await cli(['plan', '-', '--format', 'csv', '--op', 'contact.update', '-w', 'acme', '--json'], {
      input: text,
    });
    expect(made.code).toBe(1);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect(plan.counts).toMatchObject({ update: 1, invalid: 1 });
    const run = await apply(plan.planId);
    expect(run.counts).toMatchObject({ total: 1, succeeded: 1 });
    expect(h.ws.contacts.get(contacts[0]!.id)!.name).toBe('Piped Rename');
  }, 120_000);

  it('without a file, "-" or --query it says how to name the rows', async () => {
    const none = await cli(['plan', '--op', 'deal.upsert', '-w', 'acme']);
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain('"-" for stdin');
  });
});

describe('crm-sync plan --query (PostgreSQL)', () => {
  it('plans the rows of a query, names them by --row-key, never shows the URL; apply writes them', async () => {
    await db.sql(`CREATE TABLE ${db.name}.deals (deal_no text, name text, value integer)`);
    const deals = [...h.ws.deals.values()].slice(5, 7).map((d) => ({ ...d }));
    await db.sql(`INSERT INTO ${db.name}.deals VALUES ($1, $2, $3), ($4, $5, $6), ($7, $8, $9)`, [
      'W-1',
      deals[0]!.name,
      deals[0]!.value + 1,
      'W-2',
      deals[1]!.name,
      deals[1]!.value,
      'W-3',
      'Warehouse planned deal',
      77,
    ]);
    const env = { WAREHOUSE_URL: urlWithPassword(PASSWORD) };
    const query = `select deal_no, name, value from ${db.name}.deals order by deal_no`;
    const writes = { ...h.ws.stats.writes };
    const made = await cli(
      [
        'plan',
        '--query',
        query,
        '--db-url-env',
        'WAREHOUSE_URL',
        '--row-key',
        'deal_no',
        '--op',
        'deal.upsert',
        '--match',
        'name',
        '-w',
        'acme',
        '--json',
      ],
      { env },
    );
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(made.stdout) as PlanJson;
    expect(plan.counts).toMatchObject({ update: 1, skip: 1, create: 1 });
    expect(h.ws.stats.writes).toEqual(writes);
    const view = await shown(plan.planId);
    expect(view.plan.source).toMatch(/^postgres \(\$WAREHOUSE_URL\): select deal_no/);
    expect(view.rows.map((r) => [r.ref, r.action])).toEqual([
      ['W-1', 'update'],
      ['W-2', 'skip'],
      ['W-3', 'create'],
    ]);
    const text = await cli(['plans', 'show', plan.planId]);
    for (const out of [made.stdout, made.stderr, text.stdout, text.stderr]) expect(out).not.toContain(PASSWORD);

    const run = await apply(plan.planId);
    expect(run.counts).toMatchObject({ total: 2, succeeded: 2 });
    expect(h.ws.deals.get(deals[0]!.id)!.value).toBe(deals[0]!.value + 1);
    const results = await resultsByRow(h, run.id);
    expect(results.map((r) => r.ref).sort()).toEqual(['W-1', 'W-3']);
  }, 120_000);

  it('a query the database refuses stores no plan (exit 2, the error named, the URL never shown)', async () => {
    const env = { WAREHOUSE_URL: urlWithPassword(PASSWORD) };
    const listed = async () =>
      (JSON.parse((await cli(['plans', 'list', '--json'])).stdout) as { plans: unknown[] }).plans.length;
    const before = await listed();
    const bad = await cli(
      ['plan', '--query', 'selec 1', '--db-url-env', 'WAREHOUSE_URL', '--op', 'deal.upsert', '-w', 'acme'],
      { env },
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('DB_QUERY');
    expect(bad.stderr).not.toContain(PASSWORD);
    expect(await listed()).toBe(before);
  }, 90_000);
});
