import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgHistory } from '../../src/history/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { createTestSchema, TEST_DATABASE_URL, type TestSchema } from '../helpers/postgres.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/*
 * Issue 34 item 4: with a history database, the workers write every applied field change to a
 * PostgreSQL table they create (batched), queried by record; a history database that goes away
 * mid-run fails no row, and the history catches up once it answers again; creates are written
 * too (their results are stored in the fence's own step). Real PostgreSQL, the
 * simulator over HTTP, real Redis; the test's own schema, dropped at the end.
 */

let h: Harness;
let schema: TestSchema;
let proxy: TcpProxy;
beforeAll(async () => {
  schema = await createTestSchema('history');
  const pgUrl = new URL(TEST_DATABASE_URL);
  proxy = await startTcpProxy({ upstreamPort: Number(pgUrl.port || 5432) });
  pgUrl.host = `127.0.0.1:${proxy.port}`;
  h = await startHarness({ records: 100 });
  h.config.history = { postgresUrl: pgUrl.toString(), table: `${schema.name}.crm_sync_history` };
  await h.startWorkers();
});
afterAll(async () => {
  await h?.close();
  await proxy?.close();
  await schema?.drop();
});

async function rowsInTable(): Promise<number> {
  const { rows } = await schema.sql(`SELECT count(*)::int AS n FROM ${schema.name}.crm_sync_history`);
  return (rows[0] as { n: number }).n;
}

async function until(check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 200));
  }
}

function renames(from: number, n: number, tag: string) {
  const contacts = [...h.ws.contacts.values()].slice(from, from + n);
  const old = contacts.map((c) => c.name);
  const file = h.file(
    `${tag}.csv`,
    csv(
      ['id', 'name'],
      contacts.map((c, i) => [c.id, `${tag} ${i}`]),
    ),
  );
  return { contacts, old, file };
}

describe('the PostgreSQL history (issue 34, item 4)', () => {
  it('is created on first use, filled in batches, and answers by record', async () => {
    const { contacts, old, file } = renames(0, 40, 'Pg');
    const run = await h.waitForRun((await h.importFile(file, 'contact.update')).id, 60_000);
    expect(run.counts.succeeded).toBe(40);
    await until(async () => (await rowsInTable().catch(() => 0)) >= 40, 15_000);
    expect(await rowsInTable()).toBe(40);
    const db = new PgHistory({ url: TEST_DATABASE_URL, table: `${schema.name}.crm_sync_history` });
    try {
      const entries = await db.query('acme', contacts[3]!.id);
      expect(entries).toEqual([
        expect.objectContaining({
          runId: run.id,
          row: 4,
          field: 'name',
          before: old[3],
          after: 'Pg 3',
          from: 'postgres',
        }),
      ]);
    } finally {
      await db.close();
    }
  }, 120_000);

  it('a history database gone mid-run fails no row; the history catches up when it answers', async () => {
    const start = await rowsInTable();
    await proxy.refuse();
    const { file } = renames(40, 30, 'Gone');
    const run = await h.waitForRun((await h.importFile(file, 'contact.update')).id, 60_000);
    expect(run.counts).toMatchObject({ succeeded: 30, failed: 0 });
    expect(await rowsInTable()).toBe(start);
    proxy.heal();
    await until(async () => (await rowsInTable()) >= start + 30, 20_000);
    expect(await rowsInTable()).toBe(start + 30);
  }, 120_000);

  it('a create is written too: its deal id and every field it sent, one row each, before empty', async () => {
    const file = h.file(
      'pg-creates.csv',
      csv(
        ['name', 'value'],
        [
          ['Pg deal one', 11],
          ['Pg deal two', 12],
        ],
      ),
    );
    const run = await h.waitForRun((await h.importFile(file, 'deal.create')).id, 60_000);
    expect(run.counts).toMatchObject({ succeeded: 2, failed: 0 });
    const ofRun = async () =>
      (
        await schema.sql(
          `SELECT record_id, field, before, after, row_number FROM ${schema.name}.crm_sync_history
            WHERE run_id = $1 ORDER BY row_number, field`,
          [run.id],
        )
      ).rows as Array<{ record_id: string; field: string; before: string | null; after: string; row_number: number }>;
    await until(async () => (await ofRun()).length >= 4, 15_000);
    const deals = new Map([...h.ws.deals.values()].map((d) => [d.name, d.id]));
    expect(await ofRun()).toEqual([
      { record_id: deals.get('Pg deal one'), field: 'name', before: null, after: 'Pg deal one', row_number: 1 },
      { record_id: deals.get('Pg deal one'), field: 'value', before: null, after: '11', row_number: 1 },
      { record_id: deals.get('Pg deal two'), field: 'name', before: null, after: 'Pg deal two', row_number: 2 },
      { record_id: deals.get('Pg deal two'), field: 'value', before: null, after: '12', row_number: 2 },
    ]);
  }, 120_000);
});
