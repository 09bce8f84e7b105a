import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * The PostgreSQL the database tests use: TEST_DATABASE_URL, else the local one (trust auth,
 * user postgres, database test). Each test file works in a schema of its own, dropped at the end.
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** The test URL with a password in it (trust auth ignores it), to check that it never leaks. */
export function urlWithPassword(password: string, url = TEST_DATABASE_URL): string {
  const u = new URL(url);
  u.password = password;
  return u.toString();
}

export interface TestSchema {
  /** The schema's name: qualify tables with it in queries. */
  name: string;
  sql(text: string, values?: unknown[]): Promise<pg.QueryResult>;
  drop(): Promise<void>;
}

/** A schema of its own (unique name) on a connection of its own; drop() removes both. */
export async function createTestSchema(kind: string): Promise<TestSchema> {
  const name = `crm_sync_test_${kind}_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  await client.query(`CREATE SCHEMA ${name}`);
  return {
    name,
    sql: (text, values) => client.query(text, values),
    async drop() {
      await client.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`).catch(() => undefined);
      await client.end();
    },
  };
}
