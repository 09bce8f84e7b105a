import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { unpauseWorkspace, workspaceStatus } from '../../src/queue/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { harnessArgs, startCli } from '../helpers/run-cli.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

let h: Harness | undefined;
let proxy: TcpProxy | undefined;
afterEach(async () => {
  await h?.close();
  await proxy?.close().catch(() => undefined);
  h = undefined;
  proxy = undefined;
});

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached in ${ms} ms (last: ${JSON.stringify(v)})`);
    await sleep(50);
  }
}

function updates(h: Harness, n: number): string {
  const deals = [...h.ws.deals.values()].slice(0, n);
  return h.file(
    'deals.csv',
    csv(
      ['id', 'name', 'value'],
      deals.map((d, i) => [d.id, `Breaker ${i}`, 1000 + i]),
    ),
  );
}

describe('circuit breaker (a workspace whose CRM does not answer is held, not burned)', () => {
  it('connection refused: the workspace is held after a short streak, no row fails, and a probe lets it go on once the CRM is back', async () => {
    // Two attempts a row: without the breaker every row would fail within a second.
    h = await startHarness({
      records: 30,
      retry: { attempts: 2, backoffMs: 50 },
      breaker: { threshold: 3, probeEveryMs: 300 },
      baseUrl: async (url, sim) => {
        proxy = await startTcpProxy({ upstreamHost: '127.0.0.1', upstreamPort: sim.port });
        return url.replace(`:${sim.port}`, `:${proxy.port}`);
      },
    });
    await proxy!.refuse();
    const run = await h.importFile(updates(h, 20), 'deal.update');
    await h.startWorkers();
    const held = await until(
      'the breaker holds the workspace',
      () => h!.runtime.store.holds('acme'),
      (x) => x.unreachable !== undefined,
    );
    expect(held.unreachable?.reason).toMatch(/unreachable \(ECONNREFUSED, 3 requests in a row\)/);
    expect(await h.runtime.queue('acme').isPaused()).toBe(true);
    // Held for a while (several probes fail): no row is failed, every row still waits.
    await sleep(1500);
    const waiting = await h.runtime.store.requireRun(run.id);
    expect(waiting.status).toBe('running');
    expect(waiting.counts).toMatchObject({ total: 20, failed: 0, succeeded: 0, queued: 20 });
    expect(h.ws.stats.writes.dealUpdate).toBe(0);

    proxy!.heal();
    const done = await h.waitForRun(run.id, 20_000);
    expect(done.counts).toMatchObject({ total: 20, succeeded: 20, failed: 0 });
    expect(await h.runtime.store.holds('acme')).toEqual({});
    expect(await h.runtime.queue('acme').isPaused()).toBe(false);
    expect(h.ws.deals.get([...h.ws.deals.keys()][19]!)?.name).toBe('Breaker 19');
  });

  it('a baseUrl with a wrong path (404 "No route"): a probe finds no CRM there, the workspace is held, no row is failed "not found"; workspace resume lifts it', async () => {
    h = await startHarness({
      records: 30,
      breaker: { threshold: 3, probeEveryMs: 60_000 },
      baseUrl: (url) => `${url}/v9-typo`,
    });
    const run = await h.importFile(updates(h, 20), 'deal.update');
    await h.startWorkers();
    const held = await until(
      'the breaker holds the workspace',
      () => h!.runtime.store.holds('acme'),
      (x) => x.unreachable !== undefined,
    );
    expect(held.unreachable?.reason).toMatch(/HTTP 404 for the rows, and .* answered 404 to the deal list/);
    await sleep(500);
    const waiting = await h.runtime.store.requireRun(run.id);
    expect(waiting.counts).toMatchObject({ failed: 0, succeeded: 0, queued: 20 });
    // One row's 404 and one probe: not a request per row.
    expect(h.ws.stats.byStatus[404] ?? 0).toBeLessThanOrEqual(1 + 8);

    const status = await workspaceStatus({ queue: h.runtime.queue('acme'), store: h.runtime.store, workspace: 'acme' });
    expect(status.unreachable?.reason).toBe(held.unreachable?.reason);
    expect(status.queuePaused).toBe(true);
    const { running } = await unpauseWorkspace({
      queue: h.runtime.queue('acme'),
      store: h.runtime.store,
      workspace: 'acme',
    });
    expect(running).toBe(true);
    // Still the wrong address: the next row's 404 is probed again and holds it again, still no row failed.
    await until(
      'held again',
      () => h!.runtime.store.holds('acme'),
      (x) => x.unreachable !== undefined,
    );
    expect((await h.runtime.store.requireRun(run.id)).counts.failed).toBe(0);
  });

  it("a record's own 404 from the real CRM fails that row as before, and holds nothing", async () => {
    h = await startHarness({ records: 30, breaker: { threshold: 3, probeEveryMs: 300 } });
    const deals = [...h.ws.deals.values()].slice(0, 6);
    const rows = deals.map((d, i) => [i % 2 === 0 ? `missing-${i}` : d.id, `Row ${i}`, i]);
    const run = await h.importFile(h.file('mixed.csv', csv(['id', 'name', 'value'], rows)), 'deal.update');
    await h.startWorkers();
    const done = await h.waitForRun(run.id);
    expect(done.counts).toMatchObject({ total: 6, succeeded: 3, failed: 3 });
    expect(await h.runtime.store.holds('acme')).toEqual({});
  });

  it('through the CLI: import --work against a mistyped baseUrl says the workspace is held and why, and fails no row', async () => {
    h = await startHarness({ records: 30, baseUrl: (url) => `${url}/v9-typo` });
    const file = updates(h, 12);
    const run = harnessArgs(h, ['import', file, '--op', 'deal.update', '-w', 'acme', '--work']);
    const cli = startCli(run.args, run.env);
    try {
      for (let i = 0; i < 600 && !cli.stderr.includes('workspace acme is held'); i++) await sleep(50);
      expect(cli.stderr).toMatch(
        /workspace acme is held: HTTP 404 for the rows, and .*v9-typo answered 404 to the deal list/,
      );
      expect(cli.stderr).toContain('crm-sync workspace resume');
      const [run] = (await h.runtime.store.listRuns({ workspace: 'acme', limit: 1 })).runs;
      expect(run?.counts).toMatchObject({ total: 12, failed: 0, queued: 12 });
    } finally {
      cli.child.kill('SIGTERM');
      await cli.exited;
    }
  }, 60_000);
});
