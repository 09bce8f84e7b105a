import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { createTestSchema, TEST_DATABASE_URL, urlWithPassword, type TestSchema } from '../helpers/postgres.js';
import { cliFor } from '../helpers/run-cli.js';

const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;

let h: Harness;
let db: TestSchema;
beforeAll(async () => {
  h = await startHarness({ records: 20 });
  db = await createTestSchema('cli');
});
afterAll(async () => {
  await db?.drop();
  await h?.close();
});

const cli = cliFor(() => h);

interface RunJson {
  id: string;
  source: string;
  status: string;
  counts: Record<string, number>;
}

describe('crm-sync import - (stdin) and --from-postgres', () => {
  it('reads NDJSON from stdin, keeps it under resultsDir/stdin, and the run reads it from there', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 3);
    const ndjson = [
      ...deals.map((d, i) => JSON.stringify({ id: d.id, name: `Piped ${i}` })),
      JSON.stringify({ id: deals[0]!.id, name: 'Bad', value: 'lots' }),
    ].join('\n');
    const done = await cli(['import', '-', '--op', 'deal.update', '-w', 'acme', '--work', '--json'], { input: ndjson });
    const run = JSON.parse(done.stdout) as RunJson;
    expect(run).toMatchObject({ status: 'completed', counts: { total: 4, succeeded: 3, invalid: 1 } });
    expect(done.code).toBe(1);
    expect(run.source).toMatch(/[/\\]stdin[/\\]stdin-.*\.ndjson$/);
    expect(readFileSync(run.source, 'utf8')).toBe(ndjson);
    expect(done.stderr).toContain(`kept as ${run.source}`);
    expect(h.ws.deals.get(deals[2]!.id)?.name).toBe('Piped 2');
    const bad = (await resultsByRow(h, run.id)).find((r) => r.status === 'invalid');
    expect(bad).toMatchObject({ row: 4, line: 4 });
  });

  it('reads CSV from stdin with --format csv', async () => {
    const deals = [...h.ws.deals.values()].slice(5, 7);
    const text = csv(
      ['id', 'name', 'value'],
      deals.map((d) => [d.id, 'From CSV pipe', 42]),
    );
    const done = await cli(
      ['import', '-', '--format', 'csv', '--op', 'deal.update', '-w', 'acme', '--work', '--json'],
      { input: text },
    );
    expect(done.code).toBe(0);
    const run = JSON.parse(done.stdout) as RunJson;
    expect(run).toMatchObject({ status: 'completed', counts: { total: 2, succeeded: 2 } });
    expect(run.source).toMatch(/\.csv$/);
    expect(h.ws.deals.get(deals[1]!.id)).toMatchObject({ name: 'From CSV pipe', value: 42 });
    expect(readdirSync(join(h.config.resultsDir, 'stdin'))).toHaveLength(2);
  });

  it('keeps no copy of stdin that no run reads: refused columns remove it, a refused option never reads it', async () => {
    const copies = () => readdirSync(join(h.config.resultsDir, 'stdin')).length;
    const before = copies();
    const refused = await cli(['import', '-', '--format', 'csv', '--op', 'deal.update', '-w', 'acme'], {
      input: csv(['id', 'nmae'], [['d1', 'Typo']]),
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('INPUT_COLUMNS');
    expect(refused.stderr).toMatch(/no run read .*stdin-.*\.csv: removed/);
    expect(copies()).toBe(before);
    const wrongOp = await cli(['import', '-', '--op', 'deal.create', '--reconcile', '-w', 'acme'], {
      input: JSON.stringify({ name: 'x' }),
    });
    expect(wrongOp.code).toBe(2);
    expect(wrongOp.stderr).toContain('--reconcile works with');
    expect(wrongOp.stderr).not.toContain('kept as');
    expect(copies()).toBe(before);
  });

  it('imports from a query with the URL from an env variable, naming rows by key; errors never show the URL', async () => {
    await db.sql(`CREATE TABLE ${db.name}.leads (lead_no text, id text, status text)`);
    const leads = [...h.ws.leads.values()].slice(0, 3);
    for (const [i, l] of leads.entries())
      await db.sql(`INSERT INTO ${db.name}.leads VALUES ($1, $2, $3)`, [
        `L-${i}`,
        l.id,
        i === 1 ? 'pondering' : 'open',
      ]);
    const env = { WAREHOUSE_URL: urlWithPassword(PASSWORD) };
    const query = `select lead_no, id, status from ${db.name}.leads order by lead_no`;
    const done = await cli(
      [
        'import',
        '--from-postgres',
        '--db-url-env',
        'WAREHOUSE_URL',
        '--query',
        query,
        '--row-key',
        'lead_no',
        '--op',
        'lead.update',
        '-w',
        'acme',
        '--work',
      ],
      { env },
    );
    expect(done.stdout).toContain('rows: 3 total');
    expect(done.code).toBe(1);
    const runs = await h.runtime.store.listRuns({});
    const run = runs.runs.find((r) => r.source.startsWith('postgres ($WAREHOUSE_URL)'))!;
    expect(run.counts).toMatchObject({ total: 3, succeeded: 2, invalid: 1 });
    expect(done.stdout).toContain(`Run ${run.id}: lead.update on acme from postgres ($WAREHOUSE_URL): select lead_no`);
    const shown = await cli(['runs', 'show', run.id]);
    expect(shown.stdout).toMatch(/row 2 \(key L-1\): invalid: status: /);
    for (const out of [done.stdout, done.stderr, shown.stdout, shown.stderr]) expect(out).not.toContain(PASSWORD);

    // The same from a file holding the URL, against a database that is not there.
    const u = new URL(TEST_DATABASE_URL);
    u.port = '1';
    u.password = PASSWORD;
    const urlFile = h.file('warehouse-url', `${u.toString()}\n`);
    const down = await cli([
      'import',
      '--from-postgres',
      '--db-url-file',
      urlFile,
      '--query',
      'select 1 as id',
      '--op',
      'lead.update',
      '-w',
      'acme',
    ]);
    expect(down.code).not.toBe(0);
    expect(down.stderr).toContain('DB_UNREACHABLE');
    expect(down.stderr).toContain(`file ${urlFile}`);
    expect(down.stderr).not.toContain(PASSWORD);

    const badQuery = await cli(
      [
        'import',
        '--from-postgres',
        '--db-url-env',
        'WAREHOUSE_URL',
        '--query',
        'selec 1',
        '--op',
        'lead.update',
        '-w',
        'acme',
      ],
      { env },
    );
    expect(badQuery.code).toBe(2);
    expect(badQuery.stderr).toContain('DB_QUERY');
    expect(badQuery.stderr).toContain('syntax error');
    expect(badQuery.stderr).not.toContain(PASSWORD);
  }, 90_000);

  it('says which arguments do not fit together, and --help explains the new options', async () => {
    const noQuery = await cli(['import', '--from-postgres', '--op', 'lead.update', '-w', 'acme']);
    expect(noQuery.stderr).toContain('--from-postgres needs --query');
    const stray = await cli(['import', 'x.csv', '--query', 'select 1', '--op', 'lead.update', '-w', 'acme']);
    expect(stray.stderr).toContain('--query reads a database: add --from-postgres');
    const nothing = await cli(['import', '--op', 'lead.update', '-w', 'acme']);
    expect(nothing.stderr).toContain('"-" for stdin');
    const help = await cli(['import', '--help']);
    for (const option of [
      '--from-postgres',
      '--query <sql>',
      '--db-url-env <name>',
      '--db-url-file <path>',
      '--row-key',
    ])
      expect(help.stdout).toContain(option);
    expect(help.stdout).toMatch(/"-"\s+reads\s+stdin/);
    expect(existsSync(h.config.resultsDir)).toBe(true);
  }, 90_000);
});
