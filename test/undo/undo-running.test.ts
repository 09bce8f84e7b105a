import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../src/runs/index.js';
import { startDashboardHarness, type DashboardHarness } from '../dashboard/dashboard-fixture.js';
import { csv } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/*
 * Issue 41 item 7 ("Done when" (d)), through the CLI and the dashboard against the simulator
 * over HTTP and real Redis: an undo of a run still running would put back only what was written
 * so far (before: accepted, exit 0 / 200, and 120–160 of 200 records kept the run's values once
 * it ended). It is refused — exit 2 and the dashboard's 409, saying why and what to do, nothing
 * planned, nothing sent — and `--cancel-first` cancels the run, waits for its rows, then undoes
 * all of them: no record keeps the run's value.
 */

let d: DashboardHarness;
beforeAll(async () => {
  // 5 writes a second: the 300-row run (a minute) is still running while the undo is asked for, on a loaded box too.
  d = await startDashboardHarness({
    records: 300,
    simRateLimit: { max: 5, windowMs: 1000 },
    knownRateLimit: { max: 5, durationMs: 1000 },
  });
  await d.h.startWorkers();
}, 60_000);
afterAll(async () => d?.close());

const cli = cliFor(() => d.h);

describe('undo of a run still running (issue 41 item 7)', () => {
  it('is refused with exit 2 and by the dashboard; --cancel-first cancels, waits and undoes every row written', async () => {
    const h = d.h;
    const contacts = [...h.ws.contacts.values()];
    const original = new Map(contacts.map((c) => [c.id, c.name]));
    const file = h.file(
      'slow.csv',
      csv(
        ['id', 'name'],
        contacts.map((c, i) => [c.id, `Running ${i}`]),
      ),
    );
    const started = await h.importFile(file, 'contact.update');
    await h.waitForRun(started.id, 60_000, (r) => r.counts.succeeded >= 10);
    const plansBefore = (await cli(['plans', 'list', '--json'])).stdout;

    const refused = await cli(['runs', 'undo', started.id, '--wait']);
    expect(refused.code, refused.stdout).toBe(2);
    expect(refused.stderr).toContain(`run ${started.id} is running: its rows are still being written`);
    expect(refused.stderr).toContain('--cancel-first');
    expect(refused.stderr).toContain('Nothing was planned');

    const page = await d.post(`/runs/${started.id}/undo`);
    expect(page.statusCode).toBe(409);
    expect(page.body).toContain('is running: its rows are still being written');
    const json = await d.post(`/runs/${started.id}/undo`, {}, { accept: 'application/json' });
    expect(json.statusCode).toBe(409);
    expect(json.json()).toMatchObject({ error: 'RUN_STATE' });

    // The refusals were of a run still running, and left no plan behind.
    const during = await h.runtime.store.requireRun(started.id);
    expect(during.status).toBe('running');
    expect((await cli(['plans', 'list', '--json'])).stdout).toBe(plansBefore);

    const undone = await cli(['runs', 'undo', started.id, '--cancel-first', '--wait', '--json'], {
      timeoutMs: 180_000,
    });
    expect(undone.code, undone.stderr).toBe(0);
    expect(undone.stderr).toContain(`run ${started.id} cancelled to undo it`);
    const report = JSON.parse(undone.stdout) as { run: RunRecord; left: unknown[] };
    const run = await h.runtime.store.requireRun(started.id);
    expect(run.status).toBe('cancelled');
    expect(run.counts.queued).toBe(0);
    expect(run.counts.succeeded).toBeGreaterThan(0);
    expect(run.counts.succeeded).toBeLessThan(300);
    expect(report.left).toEqual([]);
    expect(report.run.counts).toMatchObject({ succeeded: run.counts.succeeded, skipped: 0, drifted: 0, failed: 0 });
    const kept = contacts.filter((c) => h.ws.contacts.get(c.id)!.name !== original.get(c.id));
    expect(kept.map((c) => c.id)).toEqual([]);
  }, 240_000);
});
