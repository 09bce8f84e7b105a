import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runsPageBody } from '../../src/dashboard/runs-page.js';
import { runLabel } from '../../src/dashboard/status-words.js';
import type { RunRecord } from '../../src/runs/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/* A run has a short label: the name given at import, or, for piped rows, "stdin" (not its spool file). */

let h: Harness;
const cli = cliFor(() => h);

beforeAll(async () => {
  h = await startHarness({ records: 10 });
});

afterAll(async () => {
  await h?.close();
});

function listed(run: RunRecord): string {
  return runsPageBody({ runs: [run], total: 1, pageSize: 50, filter: { page: 1 }, workspaces: ['acme'] }).value;
}

describe('a run label', () => {
  it('import --name names the run on the dashboard', async () => {
    const deals = [...h.ws.deals.values()].slice(0, 2);
    const file = h.file(
      'export-2026-11-26T0102.csv',
      csv(
        ['id', 'name'],
        deals.map((d) => [d.id, d.name]),
      ),
    );
    const res = await cli(['import', file, '--op', 'deal.update', '-w', 'acme', '--name', 'Q4 owners', '--json']);
    expect(res.code).toBe(0);
    const id = (JSON.parse(res.stdout) as { id: string }).id;
    const run = await h.runtime.store.requireRun(id);
    expect(run.options.label).toBe('Q4 owners');
    expect(runLabel(run)).toBe('Q4 owners');
    expect(listed(run)).toContain('<b>Q4 owners</b>');
    const bad = await cli(['import', file, '--op', 'deal.update', '-w', 'acme', '--name', '  ']);
    expect(bad.code).toBe(2);
  }, 30_000);

  it('a piped run is "stdin", not its spool file', async () => {
    const [deal] = [...h.ws.deals.values()];
    const res = await cli(['import', '-', '--op', 'deal.update', '-w', 'acme', '--json'], {
      input: `${JSON.stringify({ id: deal!.id, name: deal!.name })}\n`,
    });
    expect(res.code).toBe(0);
    const run = await h.runtime.store.requireRun((JSON.parse(res.stdout) as { id: string }).id);
    expect(run.source).toMatch(/stdin-/);
    expect(listed(run)).toContain('<b>stdin (ndjson)</b>');
    expect(listed(run)).not.toMatch(/<b>stdin-/);
  }, 30_000);
});
