import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgTableName } from '../../src/history/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { createTestSchema, TEST_DATABASE_URL, type TestSchema } from '../helpers/postgres.js';
import { harnessArgs, runCli } from '../helpers/run-cli.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/*
 * Issue 41 items 4 and 9: the history database down while a worker stops loses no change (a
 * worker that starts later writes them from the run's results), `history` while the database is
 * down reads the runs in Redis and says so, a run that left Redis before its changes reached the
 * table is named as a gap, and table names that are SQL reserved words work end to end. Real
 * PostgreSQL behind a TCP relay that is cut, the simulator over HTTP, real Redis, the CLI as a
 * user runs it; the test's own schema, dropped at the end.
 */

let h: Harness;
let schema: TestSchema;
let proxy: TcpProxy;
let table: string;
/** A config file like the harness's, with the history database behind the relay. */
let relayConfig: string;

beforeAll(async () => {
  schema = await createTestSchema('catchup');
  table = `${schema.name}.crm_sync_history`;
  const pgUrl = new URL(TEST_DATABASE_URL);
  proxy = await startTcpProxy({ upstreamPort: Number(pgUrl.port || 5432) });
  pgUrl.host = `127.0.0.1:${proxy.port}`;
  h = await startHarness({ records: 400 });
  h.config.history = { postgresUrl: pgUrl.toString(), table };
  relayConfig = withHistory(h, 'relay', { postgresUrl: pgUrl.toString(), table });
});
afterAll(async () => {
  await h?.close();
  await proxy?.close();
  await schema?.drop();
});

/** A copy of the harness's config file with `history` set; returns its path. */
function withHistory(harness: Harness, name: string, history: { postgresUrl: string; table: string }): string {
  const raw = JSON.parse(readFileSync(harness.configPath, 'utf8')) as Record<string, unknown>;
  const path = join(harness.dir, `${name}.config.json`);
  writeFileSync(path, JSON.stringify({ ...raw, history }, null, 2));
  return path;
}

function cli(config: string, args: string[]) {
  const run = harnessArgs({ configPath: config, env: h.env }, args);
  return runCli(run.args, run.env, 90_000);
}

/** The run's rows in the table; 0 while no worker has made the table yet. */
async function rowsOfRun(tableName: string, runId: string): Promise<number> {
  const { rows } = await schema
    .sql(`SELECT count(*)::int AS n FROM ${pgTableName(tableName).sql} WHERE run_id = $1`, [runId])
    .catch((err: { code?: string }) => {
      if (err.code === '42P01') return { rows: [{ n: 0 }] };
      throw err;
    });
  return (rows[0] as { n: number }).n;
}

async function until(check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 250));
  }
}

let next = 0;
function renames(n: number, tag: string) {
  const contacts = [...h.ws.contacts.values()].slice(next, next + n);
  next += n;
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

describe('the PostgreSQL history, caught up from the runs (issue 41, items 4 and 9)', () => {
  it('database cut while a worker stops: every change is there once it answers and a worker starts; history reads Redis meanwhile', async () => {
    await proxy.refuse();
    const pool = await h.startWorkers();
    const { contacts, old, file } = renames(300, 'Cut');
    const run = await h.waitForRun((await h.importFile(file, 'contact.update')).id, 90_000);
    expect(run.counts).toMatchObject({ succeeded: 300, failed: 0 });
    await pool.close(); // the worker stops with its 300 changes unwritten

    // While the database is down, `history` reads the runs in Redis and says so plainly.
    const down = await cli(relayConfig, ['history', contacts[7]!.id, '-w', 'acme']);
    expect(down.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(down.code).toBe(0);
    expect(down.stderr).toContain('note: the history database does not answer');
    expect(down.stderr).toContain("this history is read from the workspace's runs in Redis");
    expect(down.stdout).toContain(`run ${run.id} row 8`);
    expect(down.stdout).toContain(`name "${old[7]}" -> "Cut 7"`);

    proxy.heal();
    expect(await rowsOfRun(table, run.id)).toBe(0);
    // Back, before any catch-up: the run still owes its changes, and `history` reads them from Redis.
    const owed = await cli(relayConfig, ['history', contacts[8]!.id, '-w', 'acme', '--json']);
    expect(owed.code).toBe(0);
    expect(JSON.parse(owed.stdout)).toEqual([
      expect.objectContaining({ runId: run.id, row: 9, field: 'name', after: 'Cut 8', from: 'redis' }),
    ]);

    // The next worker to start writes what the stopped one could not.
    const later = await h.startWorkers({ historyCatchUpMs: 1000 });
    await until(async () => (await rowsOfRun(table, run.id)) >= 300, 60_000);
    expect(await rowsOfRun(table, run.id)).toBe(300);
    const { rows: twice } = await schema.sql(
      `SELECT row_number, field FROM ${table} WHERE run_id = $1 GROUP BY row_number, field HAVING count(*) > 1`,
      [run.id],
    );
    expect(twice).toEqual([]);
    const now = await cli(relayConfig, ['history', contacts[8]!.id, '-w', 'acme', '--json']);
    expect(JSON.parse(now.stdout)).toEqual([
      expect.objectContaining({ runId: run.id, row: 9, field: 'name', after: 'Cut 8', from: 'postgres' }),
    ]);
    expect(now.stderr).toBe('');
    await later.close();
  }, 240_000);

  it('a run removed from Redis before its changes reached the database is a gap `history` names', async () => {
    await proxy.refuse();
    const { contacts, file } = renames(20, 'Gap');
    // A worker without the history database: nothing but the run's results holds the changes.
    const pool = await h.startWorkers({ config: { ...h.config, history: undefined } });
    const run = await h.waitForRun((await h.importFile(file, 'contact.update')).id, 90_000);
    expect(run.counts).toMatchObject({ succeeded: 20 });
    await pool.close();
    const pruned = await cli(relayConfig, ['runs', 'delete', run.id]);
    expect(pruned.code).toBe(0);
    proxy.heal();
    const shown = await cli(relayConfig, ['history', contacts[2]!.id, '-w', 'acme']);
    expect(shown.code).toBe(0);
    expect(shown.stderr).toContain(
      `history gap: 20 succeeded row(s) of run ${run.id} had not reached the history database`,
    );
    expect(shown.stderr).toContain('while the history database did not answer');
  }, 240_000);

  it.each(['order', 'select'])(
    'a table named %s (an SQL reserved word) works end to end',
    async (word) => {
      // Unqualified (`schema.order` is valid SQL unquoted): the test's schema is first in the search path.
      const url = new URL(TEST_DATABASE_URL);
      url.searchParams.set('options', `-c search_path=${schema.name}`);
      const config = withHistory(h, word, { postgresUrl: url.toString(), table: word });
      const name = `${schema.name}.${word}`;
      const check = await cli(config, ['check']);
      expect(check.stdout + check.stderr).toContain(`the history database answers (table ${word})`);
      const worker = harnessArgs({ configPath: config, env: h.env }, ['worker', '--concurrency', '4']);
      const { startCli } = await import('../helpers/run-cli.js');
      const child = startCli(worker.args, worker.env);
      try {
        const { contacts, file } = renames(10, `Word ${word}`);
        const run = await h.waitForRun((await h.importFile(file, 'contact.update')).id, 90_000);
        expect(run.counts).toMatchObject({ succeeded: 10 });
        await until(async () => (await rowsOfRun(name, run.id)) >= 10, 60_000);
        expect(await rowsOfRun(name, run.id)).toBe(10);
        const shown = await cli(config, ['history', contacts[4]!.id, '-w', 'acme', '--json']);
        expect(JSON.parse(shown.stdout)).toEqual([
          expect.objectContaining({ runId: run.id, row: 5, after: `Word ${word} 4`, from: 'postgres' }),
        ]);
      } finally {
        child.child.kill('SIGTERM');
        await child.exited;
      }
    },
    240_000,
  );
});
