import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { isCrmSyncError } from '../../src/errors/index.js';
import { ingest, openPostgresSource, type IngestedRow, type SourceItem } from '../../src/ingest/index.js';
import { createTestSchema, TEST_DATABASE_URL, urlWithPassword, type TestSchema } from '../helpers/postgres.js';

const PASSWORD = 'pw-s3cret-9f2c';

function source(query: string, extra: { url?: string; keyColumn?: string; batchRows?: number } = {}) {
  return openPostgresSource({
    url: new Secret(extra.url ?? urlWithPassword(PASSWORD)),
    urlSource: { env: 'WAREHOUSE_URL' },
    query,
    ...(extra.keyColumn !== undefined ? { keyColumn: extra.keyColumn } : {}),
    ...(extra.batchRows !== undefined ? { batchRows: extra.batchRows } : {}),
  });
}

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

async function failure(run: () => Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await run();
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a failure');
}

describe('PostgreSQL source', () => {
  let db: TestSchema;

  beforeAll(async () => {
    db = await createTestSchema('source');
    await db.sql(`CREATE TABLE ${db.name}.contacts (
      contact_ref text PRIMARY KEY, id text, name text, email text, phone_number text,
      tag_ids text[], active boolean, score numeric, seen date)`);
    await db.sql(
      `INSERT INTO ${db.name}.contacts VALUES
        ('C-1', 'c1', 'Ada', 'ada@example.com', '+1 555', '{t1,t2}', true, 12.50, '2024-02-29'),
        ('C-2', 'c2', NULL, 'not an email', NULL, NULL, false, NULL, NULL),
        ('C-3', 'c3', 'Cy', 'cy@example.com', NULL, '{}', NULL, 3, '2023-01-01')`,
    );
  });
  afterAll(async () => {
    await db.drop();
  });

  it('streams rows in the text form a CSV cell has, each named by its key', async () => {
    const reader = source(`select * from ${db.name}.contacts order by contact_ref`, {
      keyColumn: 'contact_ref',
      batchRows: 2,
    });
    const items = (await all(reader)) as Array<Extract<SourceItem, { kind: 'record' }>>;
    expect(reader.columns).toEqual([
      'contact_ref',
      'id',
      'name',
      'email',
      'phone_number',
      'tag_ids',
      'active',
      'score',
      'seen',
    ]);
    expect(items.map((i) => [i.row, i.line, i.ref])).toEqual([
      [1, 1, 'C-1'],
      [2, 2, 'C-2'],
      [3, 3, 'C-3'],
    ]);
    expect(items[0]?.values).toMatchObject({
      tag_ids: ['t1', 't2'],
      active: 'true',
      score: '12.50',
      seen: '2024-02-29',
    });
    expect(items[1]?.values).toMatchObject({ name: null, active: 'false' });
    expect(items[0]?.original).toMatchObject({ tag_ids: 't1;t2', active: 'true', score: '12.50' });
    expect(items[1]?.original).toMatchObject({ name: '', phone_number: '' });
    // The source's label names where the URL comes from, never the URL.
    expect(reader.label).toContain('$WAREHOUSE_URL');
    expect(reader.label).not.toContain(PASSWORD);
    expect(JSON.stringify(reader.spec)).not.toContain(PASSWORD);
  });

  it('decodes query rows with the one row decoder: bad cells are field errors, the rest go on', async () => {
    const reader = source(
      `select contact_ref, id, name, email, phone_number, tag_ids from ${db.name}.contacts order by contact_ref`,
      { keyColumn: 'contact_ref' },
    );
    // The key column is read on top of the fields (as reconcile's key column is).
    const { rows } = await ingest(reader, { op: 'contact.update', extraColumns: ['contact_ref'] });
    const decoded: IngestedRow[] = await all(rows);
    expect(decoded.map((r) => [r.row, r.ref, r.code])).toEqual([
      [1, 'C-1', undefined],
      [2, 'C-2', 'ROW_INVALID'],
      [3, 'C-3', undefined],
    ]);
    expect(decoded[0]?.payload).toMatchObject({
      op: 'contact.update',
      id: 'c1',
      fields: { name: 'Ada', email: 'ada@example.com', tag_ids: ['t1', 't2'] },
    });
    expect(decoded[1]?.errors?.map((e) => e.field)).toEqual(['email']);
    // An empty array is an explicit empty list, as a JSON file's [] is.
    expect(decoded[2]?.payload).toMatchObject({ fields: { tag_ids: [] } });
  });

  it('refuses query columns that map to nothing before a row is read, like a file header', async () => {
    const reader = source(`select id, name, email, 42 as shoe_size from ${db.name}.contacts`);
    const err = await failure(() => ingest(reader, { op: 'contact.update' }));
    expect(err.code).toBe('INPUT_COLUMNS');
    expect(err.message).toContain('shoe_size');
  });

  it('refuses a key column the query does not return, and columns named twice', async () => {
    const missing = await failure(() => all(source(`select id from ${db.name}.contacts`, { keyColumn: 'ref' })));
    expect(missing.code).toBe('INPUT_COLUMNS');
    expect(missing.message).toContain('"ref"');
    const twice = await failure(() => all(source(`select id, name as id from ${db.name}.contacts`)));
    expect(twice.code).toBe('INPUT_COLUMNS');
    expect(twice.message).toContain('name them apart with AS');
  });

  it('a bad query is DB_QUERY with the database error, and never the password', async () => {
    const err = await failure(() => all(source(`select nope from ${db.name}.contacts`)));
    expect(isCrmSyncError(err, 'DB_QUERY')).toBe(true);
    expect(err.message).toMatch(/column "nope" does not exist.*SQLSTATE 42703|SQLSTATE 42703.*column "nope"/);
    expect(err.message).toContain('WAREHOUSE_URL');
    expect(err.message).not.toContain(PASSWORD);
    const unknown = await failure(() => all(source('select * from no_such_schema_x.t')));
    expect(unknown.code).toBe('DB_QUERY');
    expect(unknown.message).toContain('42P01');
  });

  it('a query that writes is refused: it runs in a read-only transaction', async () => {
    const err = await failure(() => all(source(`delete from ${db.name}.contacts returning id`)));
    expect(err.code).toBe('DB_QUERY');
    expect(err.message).toContain('read-only');
    expect((await db.sql(`select count(*)::int as n from ${db.name}.contacts`)).rows[0]).toEqual({ n: 3 });
  });

  it('an unreachable database is DB_UNREACHABLE, with the URL and password stripped', async () => {
    const u = new URL(TEST_DATABASE_URL);
    u.port = '1';
    u.password = PASSWORD;
    const err = await failure(() => all(source('select 1', { url: u.toString() })));
    expect(isCrmSyncError(err, 'DB_UNREACHABLE')).toBe(true);
    expect(err.message).toContain('cannot connect to 127.0.0.1:1/test as postgres');
    expect(err.message).toContain('env variable WAREHOUSE_URL');
    expect(err.message).not.toContain(PASSWORD);
    expect(err.message).not.toContain(u.toString());
    const noDb = new URL(TEST_DATABASE_URL);
    noDb.pathname = '/no_such_database_x';
    const missing = await failure(() => all(source('select 1', { url: noDb.toString() })));
    expect(missing.code).toBe('DB_UNREACHABLE');
    expect(missing.message).toContain('3D000');
  });

  it('stopping early closes the connection (no session left behind)', async () => {
    // Only this reader's session is watched (other files' crm-sync sessions come and go): its
    // pid, found by the marker while it reads, must be gone after the break, whatever it ran last.
    const marker = 'crm_sync_stop_early';
    const reader = source(`select /* ${marker} */ g as id, 'x' as name from generate_series(1, 100000) g`, {
      batchRows: 100,
    });
    let n = 0;
    let pids: number[] = [];
    for await (const _ of reader)
      if (++n === 250) {
        const found = await db.sql(
          `select pid from pg_stat_activity where application_name = 'crm-sync' and query like $1 and pid <> pg_backend_pid()`,
          [`%${marker}%`],
        );
        pids = (found.rows as { pid: number }[]).map((r) => r.pid);
        break;
      }
    expect(pids).toHaveLength(1);
    const open = async () => {
      const { rows } = await db.sql(`select count(*)::int as n from pg_stat_activity where pid = any($1::int[])`, [
        pids,
      ]);
      return (rows[0] as { n: number }).n;
    };
    for (let i = 0; i < 50 && (await open()) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await open()).toBe(0);
  });

  /** Sessions still open whose last statement carries `marker` (other test files' sessions do not). */
  async function sessionsOf(marker: string): Promise<number> {
    const count = async () =>
      (
        (
          await db.sql(
            `select count(*)::int as n from pg_stat_activity where query like $1 and pid <> pg_backend_pid()`,
            [`%${marker}%`],
          )
        ).rows[0] as { n: number }
      ).n;
    for (let i = 0; i < 50 && (await count()) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    return count();
  }

  it('a run that stops reading the checked rows early (a cancel) ends the session: it is not left idle in its transaction', async () => {
    const marker = 'crm_sync_leak_break';
    const { rows } = await ingest(
      source(`select /* ${marker} */ 'c' || g as id, 'x' as name from generate_series(1, 100000) g`, {
        batchRows: 100,
      }),
      { op: 'contact.update' },
    );
    let n = 0;
    for await (const _ of rows) if (++n === 250) break;
    expect(n).toBe(250);
    expect(await sessionsOf(marker)).toBe(0);
  });

  it('a source checked and then never read (the CRM index failed first) is let go by close()', async () => {
    const marker = 'crm_sync_leak_close';
    const checked = await ingest(source(`select /* ${marker} */ 'c1' as id, 'x' as name`), { op: 'contact.update' });
    const before = (
      (await db.sql(`select count(*)::int as n from pg_stat_activity where query like $1`, [`%${marker}%`]))
        .rows[0] as { n: number }
    ).n;
    expect(before).toBe(1);
    await checked.close();
    await checked.close();
    expect(await sessionsOf(marker)).toBe(0);
  });

  it('a database URL the driver cannot parse is a usage error naming where it came from, not a stack', async () => {
    const err = await failure(() => all(source('select 1', { url: `postgres://u:pa#${PASSWORD}@h/db` })));
    expect(isCrmSyncError(err, 'USAGE')).toBe(true);
    expect(err.message).toContain('env variable WAREHOUSE_URL is not a valid URL');
    expect(err.message).not.toContain(PASSWORD);
  });

  it('a server statement_timeout shorter than the run ends it part-way as DB_QUERY, saying how to allow it', async () => {
    // The cursor's statement lasts while the run is produced (the producer waits on a full queue).
    const u = new URL(TEST_DATABASE_URL);
    u.searchParams.set('options', '-c statement_timeout=300');
    const { rows } = await ingest(
      source(`select 'c' || g as id, 'x' as name from generate_series(1, 2000) g`, {
        url: u.toString(),
        batchRows: 100,
      }),
      { op: 'contact.update' },
    );
    await new Promise((r) => setTimeout(r, 1000));
    let read = 0;
    const err = await failure(async () => {
      for await (const _ of rows) read++;
    });
    expect(read).toBe(100);
    expect(err.code).toBe('DB_QUERY');
    expect(err.message).toContain('SQLSTATE 57014');
    expect(err.message).toContain('statement_timeout=0');
  });
});
