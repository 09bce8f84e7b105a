import type { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registrationsFor } from '../../src/cli/commands.js';
import { buildProgram } from '../../src/cli/program.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 20 });
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

describe('crm-sync import / runs (child processes, as a user runs them)', () => {
  it('imports with --work, exits 1 when rows failed, and export/show/list/retry work on the run', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 5);
    const file = h.file(
      'd.csv',
      csv(
        ['id', 'name', 'value'],
        [...deals.map((d) => [d.id, 'CLI', 7]), ['del_missing', 'Nope', 1], [deals[0]!.id, 'Bad', 'x']],
      ),
    );
    const imported = await cli(['import', file, '--op', 'deal.update', '-w', 'acme', '--work', '--json']);
    expect(imported.code).toBe(1);
    const run = JSON.parse(imported.stdout) as { id: string; status: string; counts: Record<string, number> };
    expect(run).toMatchObject({ status: 'completed', counts: { total: 7, succeeded: 5, failed: 1, invalid: 1 } });
    expect(imported.stderr).not.toContain(h.apiKey);

    const exported = await cli(['runs', 'export', run.id, '--failed', '--out', '-']);
    expect(exported.code).toBe(0);
    const lines = exported.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^crm_sync_run_id,crm_sync_row,/);
    expect(lines).toHaveLength(3);
    expect(exported.stdout).toContain('del_missing');

    const shown = await cli(['runs', 'show', run.id]);
    expect(shown.stdout).toContain('row 6');
    expect(shown.stdout).toMatch(/HTTP 404/);
    expect(shown.code).toBe(1);

    const listed = await cli(['runs', 'list', '--json']);
    expect((JSON.parse(listed.stdout) as { runs: Array<{ id: string }> }).runs.map((r) => r.id)).toContain(run.id);

    // The 404 row stays failed on retry; the command reports the outcome and exit code.
    const retried = await cli(['runs', 'retry', run.id, '--rows', '6', '--work']);
    expect(retried.stdout).toContain('1 row read again: 1 queued');
    expect(retried.code).toBe(1);
  }, 90_000);

  it('--json without --wait prints one JSON document (the run, queued)', async () => {
    const d = [...h.ws.deals.values()][9]!;
    const queued = await cli([
      'import',
      h.file('q.csv', csv(['id', 'name'], [[d.id, 'Q']])),
      '--op',
      'deal.update',
      '-w',
      'acme',
      '--json',
    ]);
    expect(queued.code).toBe(0);
    const run = JSON.parse(queued.stdout) as { id: string; producerDone: boolean; counts: { queued: number } };
    expect(run).toMatchObject({ producerDone: true, counts: { queued: 1 } });
  }, 30_000);

  it('explains bad usage with exit code 2 and sends nothing', async () => {
    const before = h.ws.stats.requests;
    const noOp = await cli(['import', h.file('x.csv', 'id,name\n1,a\n'), '-w', 'acme']);
    expect(noOp.code).toBe(2);
    expect(noOp.stderr).toMatch(/--op <operation>/);
    const badWs = await cli(['import', h.file('y.csv', 'id,name\n1,a\n'), '--op', 'deal.update', '-w', 'initech']);
    expect(badWs.code).toBe(2);
    expect(badWs.stderr).toMatch(/workspace "initech" is not configured.*configured: acme/);
    const missingFile = await cli([
      'import',
      '/nonexistent/file.csv',
      '--op',
      'deal.update',
      '-w',
      'acme',
      '--dry-run',
    ]);
    expect(missingFile.code).toBe(2);
    expect(missingFile.stderr).toMatch(/INPUT_UNREADABLE/);
    const unknownRun = await cli(['runs', 'show', 'no-such-run']);
    expect(unknownRun.code).toBe(2);
    expect(unknownRun.stderr).toMatch(/RUN_NOT_FOUND/);
    expect(h.ws.stats.requests).toBe(before);
  }, 60_000);

  it('--help of every command and subcommand explains it and every option', async () => {
    const program = buildProgram(await registrationsFor([]));
    const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
    const commands = all(program).slice(1);
    expect(commands.map((c) => c.name())).toEqual(
      expect.arrayContaining([
        'import',
        'worker',
        'runs',
        'list',
        'show',
        'export',
        'retry',
        'resume',
        'reconcile',
        'verify',
        'schedule',
        'scheduler',
        'dashboard',
        'demo',
        'sim',
      ]),
    );
    for (const c of commands) {
      expect(c.description().length, `${c.name()} has a description`).toBeGreaterThan(10);
      for (const o of c.options) expect(o.description.length, `${c.name()} ${o.flags} is explained`).toBeGreaterThan(5);
      expect(c.helpInformation()).toMatch(/^Usage: crm-sync /);
    }
    // And the real binary prints it (one child process is enough to prove the wiring).
    const help = await cli(['import', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--dry-run');
  }, 60_000);
});
