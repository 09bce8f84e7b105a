import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueuePresenceWatch } from '../../src/cli/queue-presence.js';
import type { WorkspaceStatus } from '../../src/queue/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor, harnessArgs, startCli } from '../helpers/run-cli.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 20 });
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);
const status = async () =>
  (JSON.parse((await cli(['workspace', 'status', '-w', 'acme', '--json'])).stdout) as WorkspaceStatus[])[0]!;

describe('pauses that mean one thing each (child processes)', () => {
  it('says when no worker serves the queue, and workspace status shows workers once one runs', async () => {
    const d = [...h.ws.deals.values()][0]!;
    const imported = await cli([
      'import',
      h.file('w.csv', csv(['id', 'name'], [[d.id, 'Waiting']])),
      '--op',
      'deal.update',
      '-w',
      'acme',
    ]);
    expect(imported.code).toBe(0);
    expect(imported.stderr).toContain("no worker serves workspace acme's queue");
    expect(imported.stderr).toContain('crm-sync worker -w acme');
    const alone = await cli(['workspace', 'status', '-w', 'acme']);
    expect(alone.code).toBe(0);
    expect(alone.stdout).toMatch(/workspace acme: active/);
    expect(alone.stdout).toContain('none serve');

    const pool = await h.startWorkers();
    try {
      expect((await status()).workers).toBeGreaterThan(0);
      const d2 = [...h.ws.deals.values()][1]!;
      const served = await cli([
        'import',
        h.file('w2.csv', csv(['id', 'name'], [[d2.id, 'Served']])),
        '--op',
        'deal.update',
        '-w',
        'acme',
        '--wait',
      ]);
      expect(served.code).toBe(0);
      expect(served.stderr).not.toContain('no worker serves');
    } finally {
      await pool.close();
    }
  }, 90_000);

  it('import --wait says while it waits that no worker serves the queue, and again once one takes the rows', async () => {
    const d = [...h.ws.deals.values()][2]!;
    const file = h.file('wait.csv', csv(['id', 'name'], [[d.id, 'Waited for']]));
    const run = harnessArgs(h, ['import', file, '--op', 'deal.update', '-w', 'acme', '--wait']);
    const cli = startCli(run.args, run.env);
    try {
      for (let i = 0; i < 400 && !cli.stderr.includes("no worker serves workspace acme's queue"); i++) await sleep(50);
      expect(cli.stderr).toContain("no worker serves workspace acme's queue");
      expect(cli.stderr).toContain('crm-sync worker -w acme');
      // What the CLI's loop asks every 5 s, asked here at chosen moments: changes only, then the all-clear.
      const watch = new QueuePresenceWatch(h.runtime.store, 'acme');
      expect(await watch.look()).toContain("no worker serves workspace acme's queue");
      expect(await watch.look()).toBeUndefined();
      const pool = await h.startWorkers();
      try {
        expect(await watch.look()).toBe('workspace acme: rows are being taken again');
        expect(await cli.exited).toBe(0);
      } finally {
        await pool.close();
      }
      expect(h.ws.deals.get(d.id)?.name).toBe('Waited for');
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 90_000);

  it('workspace status shows a workspace the circuit breaker holds, and workspace resume lifts it', async () => {
    await h.runtime.store.setHold(
      'acme',
      'unreachable',
      'the CRM at http://x is unreachable (ECONNREFUSED, 5 requests in a row)',
    );
    await h.runtime.queue('acme').pause();
    const shown = await cli(['workspace', 'status', '-w', 'acme']);
    expect(shown.stdout).toMatch(/workspace acme: HELD \(the CRM does not answer: circuit breaker\)/);
    expect(shown.stdout).toMatch(/held since .*: the CRM at http:\/\/x is unreachable \(ECONNREFUSED/);
    const lifted = await cli(['workspace', 'resume', '-w', 'acme']);
    expect(lifted.stdout).toContain('workspace acme resumed');
    expect(await status()).toMatchObject({ queuePaused: false });
    expect((await status()).unreachable).toBeUndefined();
  }, 60_000);

  it("runs resume lifts a refused key's block but not an operator's pause; workspace resume lifts only the pause", async () => {
    const pool = await h.startWorkers();
    try {
      h.ws.revokeApiKey(h.apiKey);
      const deals = [...h.ws.deals.values()].slice(5, 8);
      const { id } = await h.importFile(
        h.file(
          'b.csv',
          csv(
            ['id', 'name'],
            deals.map((x) => [x.id, 'After both']),
          ),
        ),
        'deal.update',
      );
      await h.waitForRun(id, 20_000, (r) => r.status === 'blocked');

      expect((await cli(['workspace', 'pause', '-w', 'acme', '--reason', 'maintenance window'])).code).toBe(0);
      const both = await status();
      expect(both).toMatchObject({ queuePaused: true, paused: { reason: 'maintenance window' }, blockedRuns: 1 });
      expect(both.blocked?.reason).toMatch(/refused the API key/);

      h.ws.addApiKey(h.apiKey);
      const resumed = await cli(['runs', 'resume', id]);
      expect(resumed.code).toBe(0);
      expect(resumed.stdout).toContain(`runs resumed: ${id}`);
      expect(resumed.stdout).toContain('stays paused by an operator: maintenance window');
      const paused = await status();
      expect(paused).toMatchObject({ queuePaused: true, paused: { reason: 'maintenance window' } });
      expect(paused.blocked).toBeUndefined();
      // Still held by the operator: nothing is sent.
      const before = h.ws.stats.requests;
      await new Promise((r) => setTimeout(r, 1000));
      expect(h.ws.stats.requests).toBe(before);
      expect(await h.runtime.store.requireRun(id)).toMatchObject({ status: 'running', counts: { queued: 3 } });

      const lifted = await cli(['workspace', 'resume', '-w', 'acme']);
      expect(lifted.stdout).toContain('workspace acme resumed');
      expect(await h.waitForRun(id)).toMatchObject({ status: 'completed', counts: { succeeded: 3 } });
      expect((await status()).queuePaused).toBe(false);
    } finally {
      h.ws.addApiKey(h.apiKey);
      await pool.close();
    }
  }, 90_000);

  it('workspace resume leaves a block by a refused key in place', async () => {
    const pool = await h.startWorkers();
    try {
      h.ws.revokeApiKey(h.apiKey);
      const d = [...h.ws.deals.values()][10]!;
      const { id } = await h.importFile(h.file('k.csv', csv(['id', 'name'], [[d.id, 'Key']])), 'deal.update');
      await h.waitForRun(id, 20_000, (r) => r.status === 'blocked');
      const lifted = await cli(['workspace', 'resume', '-w', 'acme']);
      expect(lifted.code).toBe(0);
      expect(lifted.stdout).toMatch(/stays blocked: The CRM refused the API key/);
      expect(await h.runtime.queue('acme').isPaused()).toBe(true);
      h.ws.addApiKey(h.apiKey);
      expect((await cli(['runs', 'resume', id])).code).toBe(0);
      expect(await h.waitForRun(id)).toMatchObject({ status: 'completed', counts: { succeeded: 1 } });
    } finally {
      h.ws.addApiKey(h.apiKey);
      await pool.close();
    }
  }, 90_000);
});
