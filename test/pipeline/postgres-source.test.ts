import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { openPostgresSource } from '../../src/ingest/index.js';
import { silentLogger } from '../../src/log/index.js';
import { resumeProducer, retryRun } from '../../src/lifecycle/index.js';
import { verifyRun } from '../../src/reconcile/index.js';
import { writeResultsCsv } from '../../src/runs/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { createTestSchema, urlWithPassword, type TestSchema } from '../helpers/postgres.js';

const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;
const URL_ENV = `CRM_SYNC_TEST_PG_${randomBytes(4).toString('hex').toUpperCase()}`;

let h: Harness;
let db: TestSchema;

function query(sql: string, keyColumn?: string) {
  return openPostgresSource({
    url: new Secret(process.env[URL_ENV] ?? ''),
    urlSource: { env: URL_ENV },
    query: sql,
    ...(keyColumn !== undefined ? { keyColumn } : {}),
  });
}

async function exportCsv(runId: string, problemsOnly = false): Promise<Array<Record<string, string>>> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  await writeResultsCsv(h.runtime.store, runId, out, { problemsOnly });
  out.end();
  return parse(Buffer.concat(chunks), { columns: true }) as Array<Record<string, string>>;
}

beforeAll(async () => {
  process.env[URL_ENV] = urlWithPassword(PASSWORD);
  h = await startHarness({ records: 30, seed: 11, retry: { attempts: 2, backoffMs: 20 } });
  await h.startWorkers();
  db = await createTestSchema('pipeline');
  await db.sql(`CREATE TABLE ${db.name}.crm_contacts (contact_ref text PRIMARY KEY, crm_id text, full_name text,
    email text, phone text)`);
  const contacts = [...h.ws.contacts.values()];
  for (const [i, c] of contacts.slice(0, 8).entries()) {
    await db.sql(`INSERT INTO ${db.name}.crm_contacts VALUES ($1, $2, $3, $4, $5)`, [
      `CUST-${100 + i}`,
      c.id,
      c.name,
      // Row 4 carries an address the decoder refuses: a field error, the rest still runs.
      i === 3 ? 'not-an-email' : c.email,
      `+1 444-555-${String(i).padStart(4, '0')}`,
    ]);
  }
});
afterAll(async () => {
  await db?.drop();
  await h?.close();
  delete process.env[URL_ENV];
});

describe('a PostgreSQL query as the source of a run', () => {
  it('imports end to end: rows are named by their key, a bad row is a field error and the rest is sent', async () => {
    const source = query(
      `select contact_ref, crm_id as id, full_name as name, email, phone as phone_number
         from ${db.name}.crm_contacts order by contact_ref`,
      'contact_ref',
    );
    const run = await h.waitForRun((await h.importFile('', 'contact.update', { file: source })).id);
    expect(run.counts).toMatchObject({ total: 8, succeeded: 7, invalid: 1, failed: 0 });
    expect(run.source).toBe(
      `postgres ($${URL_ENV}): select contact_ref, crm_id as id, full_name as name, email, phone as phone_number from ${db.name}.crm_contacts order by contact_ref`,
    );
    expect(run.options.query).toEqual({
      urlEnv: URL_ENV,
      query: expect.stringContaining('select contact_ref') as unknown,
      keyColumn: 'contact_ref',
    });
    expect(run.columns).toEqual(['contact_ref', 'id', 'name', 'email', 'phone_number']);

    const results = await resultsByRow(h, run.id);
    expect(results.map((r) => r.ref)).toEqual(Array.from({ length: 8 }, (_, i) => `CUST-${100 + i}`));
    const bad = results.find((r) => r.status === 'invalid');
    expect(bad).toMatchObject({ ref: 'CUST-103', code: 'ROW_INVALID' });
    expect(bad?.errors?.map((e) => e.field)).toEqual(['email']);
    const first = [...h.ws.contacts.values()][0]!;
    expect(first.phone_number).toBe('+1 444-555-0000');

    // The export names the source row next to its line.
    const exported = await exportCsv(run.id, true);
    expect(Object.keys(exported[0]!).slice(0, 4)).toEqual([
      'crm_sync_run_id',
      'crm_sync_row',
      'crm_sync_line',
      'crm_sync_key',
    ]);
    expect(exported.map((r) => r.crm_sync_key)).toEqual(['CUST-103']);

    // Nothing the run stored or printed holds the URL or its password.
    const stored = JSON.stringify([run, results, exported]);
    expect(stored).not.toContain(PASSWORD);
    expect(stored).not.toContain(process.env[URL_ENV]);

    // A query gives no promise of the same rows again: a run cut off mid-query is not resumed.
    const cut = await h.runtime.store.createRun({
      workspace: 'acme',
      operation: 'contact.update',
      source: run.source,
      options: run.options,
    });
    await h.runtime.store.setStatus(cut.id, 'failed', 'its producer stopped');
    await expect(
      resumeProducer({ runId: cut.id, queue: h.runtime.queue('acme'), store: h.runtime.store }),
    ).rejects.toThrow(/rows came from a database query/);
    // Verify checks the digests kept with the results, without running the query again.
    const client = createCrmClient(h.config, 'acme', silentLogger);
    const drift = new PassThrough();
    const lines: string[] = [];
    drift.on('data', (c: Buffer) => lines.push(c.toString()));
    h.ws.contacts.get(first.id)!.phone_number = '+1 000';
    const report = await verifyRun({ runId: run.id, store: h.runtime.store, client, out: drift }).finally(() =>
      client.close(),
    );
    expect(report).toMatchObject({ checked: 7, matching: 6, drifted: 1 });
    expect(lines.join('')).toContain('row,line,key,record_id,field,sent,current');
    expect(lines.join('')).toContain(`1,1,CUST-100,${first.id},phone_number`);
  });

  it('retries failed rows with the values stored for them, not a fresh read of the query', async () => {
    await db.sql(`CREATE TABLE ${db.name}.deal_feed (deal_ref text, id text, name text, value numeric)`);
    const deals = [...h.ws.deals.values()].slice(0, 4);
    for (const [i, d] of deals.entries())
      await db.sql(`INSERT INTO ${db.name}.deal_feed VALUES ($1, $2, $3, $4)`, [`D-${i}`, d.id, `Feed ${i}`, 10.5 + i]);
    h.ws.setFaults({ errorRate: 1 });
    const source = query(`select deal_ref, id, name, value from ${db.name}.deal_feed order by deal_ref`, 'deal_ref');
    const failed = await h.waitForRun((await h.importFile('', 'deal.update', { file: source })).id, 30_000);
    expect(failed.counts).toMatchObject({ total: 4, failed: 4 });
    h.ws.setFaults({});
    // The database moves on (and even loses the table): the retry must not care.
    await db.sql(`UPDATE ${db.name}.deal_feed SET name = 'CHANGED'`);
    await db.sql(`DROP TABLE ${db.name}.deal_feed`);

    await retryRun({ runId: failed.id, queue: h.runtime.queue('acme'), store: h.runtime.store });
    const done = await h.waitForRun(failed.id, 30_000, (r) => r.counts.queued === 0 && r.status !== 'running');
    expect(done.counts).toMatchObject({ total: 4, succeeded: 4, failed: 0 });
    expect(deals.map((d) => h.ws.deals.get(d.id)).map((d) => [d?.name, d?.value])).toEqual([
      ['Feed 0', 10.5],
      ['Feed 1', 11.5],
      ['Feed 2', 12.5],
      ['Feed 3', 13.5],
    ]);
    expect((await resultsByRow(h, failed.id)).map((r) => [r.status, r.ref])).toEqual([
      ['succeeded', 'D-0'],
      ['succeeded', 'D-1'],
      ['succeeded', 'D-2'],
      ['succeeded', 'D-3'],
    ]);
  });

  it('a bad query ends the import before a run exists, with a typed error and no secret', async () => {
    const before = (await h.runtime.store.listRuns({})).total;
    const err = (await h
      .importFile('', 'contact.update', { file: query(`select crm_id as id, emial from ${db.name}.crm_contacts`) })
      .catch((e: unknown) => e)) as Error & { code?: string };
    expect(err.code).toBe('DB_QUERY');
    expect(err.message).toContain('emial');
    expect(err.message).not.toContain(PASSWORD);
    expect((await h.runtime.store.listRuns({})).total).toBe(before);
  });
});
