import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDefinitions, runSync, type SyncDefinition } from '../../src/schedule/index.js';
import { resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { createTestSchema, urlWithPassword, type TestSchema } from '../helpers/postgres.js';
import { writes } from '../reconcile/fixtures.js';

const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;
const URL_ENV = `CRM_SYNC_TEST_PG_${randomBytes(4).toString('hex').toUpperCase()}`;

describe('nightly syncs from a PostgreSQL view', () => {
  let h: Harness;
  let db: TestSchema;
  let jobs: string;

  const define = (name: string, extra: Record<string, unknown>): SyncDefinition => {
    const body = { name, workspace: 'acme', schedule: { cron: '0 2 * * *' }, ...extra };
    writeFileSync(join(jobs, `${name}.json`), JSON.stringify(body));
    return loadDefinitions(jobs).find((d) => d.name === name)!;
  };

  beforeAll(async () => {
    process.env[URL_ENV] = urlWithPassword(PASSWORD);
    h = await startHarness({ records: 40, seed: 3 });
    await h.startWorkers();
    jobs = join(h.dir, 'jobs');
    mkdirSync(jobs);
    db = await createTestSchema('sync');
    // The warehouse holds every CRM contact; six of them have a new phone number.
    await db.sql(`CREATE TABLE ${db.name}.contacts (customer_no text, full_name text, email text, phone text)`);
    for (const [i, c] of [...h.ws.contacts.values()].entries()) {
      const phone = i % 7 === 0 ? `+1 222-555-${String(i).padStart(4, '0')}` : c.phone_number;
      await db.sql(`INSERT INTO ${db.name}.contacts VALUES ($1, $2, $3, $4)`, [`K${i}`, c.name, c.email, phone]);
    }
    await db.sql(`CREATE VIEW ${db.name}.crm_contacts_v AS
      SELECT customer_no, full_name AS name, email, phone AS phone_number FROM ${db.name}.contacts`);
  });
  afterAll(async () => {
    await db?.drop();
    await h?.close();
    delete process.env[URL_ENV];
  });

  it('the first night sends only what differs; the second night, with no change, sends nothing', async () => {
    const def = define('contacts-from-view', {
      operation: 'contact.update',
      matchKey: 'email',
      source: {
        postgres: {
          urlEnv: URL_ENV,
          query: `select customer_no, name, email, phone_number from ${db.name}.crm_contacts_v order by customer_no`,
          keyColumn: 'customer_no',
        },
      },
    });
    // The key column is read by the source itself: it needs no mapping.
    h.ws.resetStats();
    const first = await runSync(def, { runtime: h.runtime, pollMs: 50 });
    expect(first).toMatchObject({
      status: 'completed',
      skipped: false,
      counts: { total: 40, succeeded: 6, skipped: 34, failed: 0, invalid: 0 },
      plan: { update: 6, skip: 34 },
    });
    expect(first.source).toContain(`$${URL_ENV}`);
    expect(JSON.stringify(first)).not.toContain(PASSWORD);
    expect(writes(h)).toBe(6);
    const updated = (await resultsByRow(h, first.runId)).filter((r) => r.status === 'succeeded');
    expect(updated.map((r) => r.ref)).toEqual(['K0', 'K14', 'K21', 'K28', 'K35', 'K7']);

    h.ws.resetStats();
    const second = await runSync(def, { runtime: h.runtime, pollMs: 50 });
    expect(second).toMatchObject({ status: 'completed', counts: { total: 40, skipped: 40, succeeded: 0 } });
    expect(writes(h)).toBe(0);
  });

  it('a deal upsert from a view creates what is missing, then sends nothing the next night', async () => {
    await db.sql(`CREATE TABLE ${db.name}.deals (deal_no text, name text, value numeric, status text)`);
    const deals = [...h.ws.deals.values()].slice(0, 3);
    for (const [i, d] of deals.entries())
      await db.sql(`INSERT INTO ${db.name}.deals VALUES ($1, $2, $3, $4)`, [`N${i}`, d.name, d.value, d.status]);
    await db.sql(
      `INSERT INTO ${db.name}.deals VALUES ('N8', 'Warehouse deal A', 1200.50, 'won'), ('N9', 'Warehouse deal B', 80, 'in_progress')`,
    );
    const def = define('deals-from-view', {
      operation: 'deal.upsert',
      source: {
        postgres: {
          urlEnv: URL_ENV,
          query: `select deal_no, name, value, status from ${db.name}.deals order by deal_no`,
          keyColumn: 'deal_no',
        },
      },
    });
    const before = h.ws.deals.size;
    h.ws.resetStats();
    const first = await runSync(def, { runtime: h.runtime, pollMs: 50 });
    expect(first).toMatchObject({ status: 'completed', plan: { create: 2, skip: 3 } });
    expect(h.ws.stats.writes).toMatchObject({ dealCreate: 2 });
    expect(h.ws.deals.size).toBe(before + 2);
    const created = [...h.ws.deals.values()].find((d) => d.name === 'Warehouse deal A');
    expect(created).toMatchObject({ value: 1200.5, status: 'won' });
    const results = await resultsByRow(h, first.runId);
    expect(results.filter((r) => r.status === 'succeeded').map((r) => r.ref)).toEqual(['N8', 'N9']);

    h.ws.resetStats();
    const second = await runSync(def, { runtime: h.runtime, pollMs: 50 });
    expect(second).toMatchObject({ status: 'completed', plan: { create: 0, update: 0, skip: 5 } });
    expect(writes(h)).toBe(0);
    expect(h.ws.deals.size).toBe(before + 2);
  });

  it('an unreachable database fails the tick with DB_UNREACHABLE and no secret; a missing URL variable says which', async () => {
    const u = new URL(process.env[URL_ENV]!);
    u.port = '1';
    const badEnv = `${URL_ENV}_BAD`;
    process.env[badEnv] = u.toString();
    try {
      const def = define('unreachable', {
        operation: 'contact.update',
        source: { postgres: { urlEnv: badEnv, query: 'select 1 as email' } },
      });
      const err = (await runSync(def, { runtime: h.runtime, pollMs: 50 }).catch((e: unknown) => e)) as Error & {
        code?: string;
      };
      expect(err.code).toBe('DB_UNREACHABLE');
      expect(err.message).toContain(`env variable ${badEnv}`);
      expect(err.message).not.toContain(PASSWORD);
    } finally {
      delete process.env[badEnv];
    }
    const missing = define('no-url', {
      operation: 'contact.update',
      source: { postgres: { urlEnv: `${URL_ENV}_UNSET`, query: 'select 1 as email' } },
    });
    await expect(runSync(missing, { runtime: h.runtime, pollMs: 50 })).rejects.toMatchObject({
      code: 'SECRET_MISSING',
      message: expect.stringContaining(`${URL_ENV}_UNSET is not set`) as unknown,
    });
  });

  it('refuses a definition whose postgres source names no URL, or both', () => {
    expect(() =>
      define('both', {
        operation: 'contact.update',
        source: { postgres: { urlEnv: 'A', urlFile: 'b', query: 'select 1' } },
      }),
    ).toThrow(/set exactly one of urlEnv/);
    expect(() =>
      define('typo', { operation: 'contact.update', source: { postgres: { urlEnv: 'A', qurey: 'x' } } }),
    ).toThrow(/SYNC_DEFINITION_INVALID|source/);
  });
});
