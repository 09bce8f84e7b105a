import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import { buildDashboard } from '../../src/dashboard/index.js';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';
import { HOST, signIn, TOKEN } from '../dashboard/dashboard-fixture.js';

/**
 * Exports follow the file they came from (issue 46, item 3): a European spreadsheet's export
 * (`;`, a UTF-8 BOM, CRLF, a quoted newline) gets its failed rows, all results and its plan back
 * the same way, so Excel with German settings opens them in columns; `--delimiter`, `--bom` and
 * `--line-ending` choose otherwise. A full export shows every row's input, not only the failed
 * ones'. Against the simulator over HTTP, with the CLI as a user runs it and the dashboard's downloads.
 */
let h: Harness;
const cli = cliFor(() => h);
beforeAll(async () => {
  h = await startHarness({ records: 20 });
});
afterAll(async () => h?.close());

const BOM = '\ufeff';

function europeanFile(): { path: string; ids: string[] } {
  const contacts = [...h.ws.contacts.values()].slice(0, 4);
  const lines = [
    'id;name;phone_number',
    `${contacts[0]!.id};"Dara;Kim";030 1234`,
    `${contacts[1]!.id};"Zweite\r\nZeile";030 5678`,
    `con_missing;Nobody;030 0000`,
    `${contacts[2]!.id};Bad Mail;030 9999`,
  ];
  const text = `${BOM}${lines.join('\r\n')}\r\n`;
  return { path: h.file('european.csv', text), ids: contacts.map((c) => c.id) };
}

describe('exports follow the source file', () => {
  it("a ;-separated file with a BOM and CRLF: runs export, --failed and the dashboard's download come back the same way; the options override", async () => {
    const { path, ids } = europeanFile();
    const imported = await cli(['import', path, '--op', 'contact.update', '-w', 'acme', '--work', '--json']);
    expect(imported.code, imported.stderr).toBe(1);
    const run = JSON.parse(imported.stdout) as { id: string; counts: Record<string, number> };
    expect(run.counts).toMatchObject({ total: 4, succeeded: 3, failed: 1 });

    const failed = await cli(['runs', 'export', run.id, '--failed', '--out', '-']);
    expect(failed.code, failed.stderr).toBe(0);
    expect(failed.stdout.startsWith(`${BOM}crm_sync_run_id;crm_sync_row;`)).toBe(true);
    expect(failed.stdout).toContain('\r\n');
    expect(failed.stdout.replace(/\r\n/g, '')).not.toContain('\n');
    expect(failed.stdout).toContain(';con_missing;Nobody;030 0000');

    // The full export: every row's input, succeeded ones too, with the quoted ; and newline intact.
    const outFile = h.file('all.csv', '');
    const all = await cli(['runs', 'export', run.id, '--out', outFile]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toContain('4 rows written to');
    expect(all.stderr).not.toContain('input columns');
    const text = readFileSync(outFile, 'utf8');
    expect(text.startsWith(BOM)).toBe(true);
    expect(text).toContain(`;${ids[0]};"Dara;Kim";030 1234\r\n`);
    expect(text).toContain(`;${ids[1]};"Zweite\r\nZeile";030 5678\r\n`);
    expect(text).toContain(`;${ids[2]};Bad Mail;030 9999\r\n`);

    const plain = await cli([
      'runs',
      'export',
      run.id,
      '--failed',
      '--out',
      '-',
      '--delimiter',
      ',',
      '--no-bom',
      '--line-ending',
      'lf',
    ]);
    expect(plain.stdout.startsWith('crm_sync_run_id,crm_sync_row,')).toBe(true);
    expect(plain.stdout).not.toContain('\r\n');
    const bad = await cli(['runs', 'export', run.id, '--delimiter', ';;']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--delimiter takes one character');

    // The exported failed rows go back in as they came out: runs retry --file reads the ; and the BOM.
    const fixed = h.file('fixed.csv', failed.stdout);
    const retried = await cli(['runs', 'retry', run.id, '--file', fixed, '--work']);
    expect(retried.stdout, retried.stderr).toContain('1 row read again: 1 queued');

    const app = await buildDashboard({ runtime: h.runtime, token: new Secret(TOKEN) });
    try {
      const headers = { host: HOST, cookie: await signIn(app) };
      const download = await app.inject({ method: 'GET', url: `/runs/${run.id}/results.csv?failed=1`, headers });
      expect(download.statusCode).toBe(200);
      expect(download.body.startsWith(`${BOM}crm_sync_run_id;crm_sync_row;`)).toBe(true);
    } finally {
      await app.close();
    }
  }, 120_000);

  it('a plan of such a file exports as the file was; a file changed since the run leaves the input of its rows empty and says so', async () => {
    const { path } = europeanFile();
    const planned = await cli(['plan', path, '--op', 'contact.update', '-w', 'acme', '--match', 'id', '--json']);
    // 1: the plan has a row that matches no record (con_missing).
    expect(planned.code, planned.stderr).toBe(1);
    const planId = (JSON.parse(planned.stdout) as { planId: string }).planId;
    const exported = await cli(['plans', 'export', planId, '--out', '-']);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout.startsWith(`${BOM}row;line;action;record_id;`)).toBe(true);
    expect(exported.stdout).toContain('\r\n');

    const imported = await cli(['import', path, '--op', 'contact.update', '-w', 'acme', '--work', '--json']);
    const run = JSON.parse(imported.stdout) as { id: string };
    h.file('european.csv', 'id;name\r\nchanged;since\r\n');
    const all = await cli(['runs', 'export', run.id, '--out', '-']);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stderr).toContain('the input columns of rows without a problem are empty: ');
    expect(all.stderr).toContain('changed since the run began');
  }, 120_000);
});
