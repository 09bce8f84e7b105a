import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor, harnessArgs, startCli } from '../helpers/run-cli.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 20 });
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);

describe('exit codes, durations and plain messages (child processes)', () => {
  it('sim on a port in use says so in one line (exit 2), without a stack trace', async () => {
    const res = await cli(['sim', '--port', String(h.sim.port)]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/port \d+ on 127\.0\.0\.1 is already in use .*--port 0 for any free one \[USAGE\]/);
    expect(res.stderr).not.toMatch(/^\s+at /m);
  }, 30_000);

  it('reconcile exits 3 when the CRM refuses the key, as the exit code table says', async () => {
    h.ws.revokeApiKey(h.apiKey);
    try {
      const file = h.file('rc.csv', csv(['email', 'name'], [['a@example.com', 'A']]));
      const res = await cli(['reconcile', file, '--op', 'contact.update', '-w', 'acme']);
      expect(res.stderr).toMatch(/CRM_AUTH/);
      expect(res.code).toBe(3);
    } finally {
      h.ws.addApiKey(h.apiKey);
    }
  }, 30_000);

  it("runs retry --file with another run's export exits 2 and queues nothing", async () => {
    const d = [...h.ws.deals.values()][0]!;
    const first = await cli([
      'import',
      h.file('a.csv', csv(['id', 'name'], [['del_missing', 'A']])),
      '--op',
      'deal.update',
      '-w',
      'acme',
      '--work',
      '--json',
    ]);
    const second = await cli([
      'import',
      h.file(
        'b.csv',
        csv(
          ['id', 'name'],
          [
            [d.id, 'B'],
            ['del_missing', 'B'],
          ],
        ),
      ),
      '--op',
      'deal.update',
      '-w',
      'acme',
      '--work',
      '--json',
    ]);
    const a = (JSON.parse(first.stdout) as { id: string }).id;
    const b = (JSON.parse(second.stdout) as { id: string }).id;
    const exported = h.file('a-failed.csv', (await cli(['runs', 'export', a, '--failed', '--out', '-'])).stdout);
    const res = await cli(['runs', 'retry', b, '--file', exported]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain(`belongs to run ${a}`);
    expect(res.stderr).toContain('nothing was queued');
    expect(await h.runtime.store.requireRun(b)).toMatchObject({
      status: 'completed',
      counts: { succeeded: 1, failed: 1, queued: 0 },
    });
  }, 60_000);

  it('a retry later does not count as run time: the last pass, active time and wall time are said apart', async () => {
    const imported = await cli([
      'import',
      h.file('t.csv', csv(['id', 'name'], [['del_missing', 'T']])),
      '--op',
      'deal.update',
      '-w',
      'acme',
      '--work',
      '--json',
    ]);
    const id = (JSON.parse(imported.stdout) as { id: string }).id;
    // A pause between the passes that the wall time must show and the active time must not
    // (durations print to 0.1 s, so 1.5 s is well clear of rounding).
    await new Promise((r) => setTimeout(r, 1500));
    const retried = await cli(['runs', 'retry', id, '--work']);
    // The run store's one wording (src/runs/run-durations.ts), shared with the dashboard.
    const m = /status: completed · active ([\d.]+) s · wall ([\d.]+) s · 2 passes \(last ([\d.]+) s\)/.exec(
      retried.stdout,
    );
    expect(m, retried.stdout).not.toBeNull();
    const [active, wall, pass] = [Number(m![1]), Number(m![2]), Number(m![3])];
    expect(wall).toBeGreaterThanOrEqual(1.5);
    expect(active).toBeLessThan(wall);
    expect(wall - active).toBeGreaterThanOrEqual(1.4); // the pause, less 0.1 s of rounding
    expect(pass).toBeLessThanOrEqual(active);
  }, 60_000);

  it('verify checks a row corrected by runs retry --file against the correction, not the original file', async () => {
    const [a, b] = [...h.ws.deals.values()].slice(4, 6);
    const file = h.file(
      'fixme.csv',
      csv(
        ['id', 'name', 'stage_id'],
        [
          [a!.id, 'Good row', h.ws.stages[0]!.id],
          [b!.id, 'Bad stage', 'stg_missing'],
        ],
      ),
    );
    const imported = await cli(['import', file, '--op', 'deal.update', '-w', 'acme', '--work', '--json']);
    const id = (JSON.parse(imported.stdout) as { id: string }).id;
    const exported = join(h.dir, 'fixme-failed.csv');
    expect((await cli(['runs', 'export', id, '--failed', '--out', exported])).code).toBe(0);
    writeFileSync(exported, readFileSync(exported, 'utf8').replace(/,stg_missing$/m, `,${h.ws.stages[0]!.id}`));
    const retried = await cli(['runs', 'retry', id, '--file', exported, '--work']);
    expect(retried.code, retried.stdout + retried.stderr).toBe(0);
    const verified = await cli(['verify', id, '--out', '-']);
    expect(verified.stderr).toMatch(/2 rows checked, 2 match, 0 drifted/);
    expect(verified.code).toBe(0);
  }, 60_000);

  it('verify checks a run against what it sent, not against its file as it is now; a run without digests refuses a changed file (exit 2)', async () => {
    const d = [...h.ws.deals.values()][3]!;
    const file = h.file('v.csv', csv(['id', 'name'], [[d.id, 'Verified']]));
    const imported = await cli(['import', file, '--op', 'deal.update', '-w', 'acme', '--work', '--json']);
    const id = (JSON.parse(imported.stdout) as { id: string }).id;
    expect((await cli(['verify', id])).code).toBe(0);
    h.file('v.csv', csv(['id', 'name'], [[d.id, 'Edited afterwards']]));
    const edited = await cli(['verify', id]);
    expect(edited.code).toBe(0);
    expect(edited.stdout).toMatch(/1 rows checked, 1 match, 0 drifted/);
    expect(edited.stdout).toMatch(
      /note: .*v\.csv changed since the run \(size .*\): rows were checked against what they sent/,
    );
    // The CRM changed meanwhile: drift is found from the digest alone.
    h.ws.updateRecord('deals', d.id, { name: 'Changed in the CRM' });
    const drift = await cli(['verify', id, '--out', '-']);
    expect(drift.code).toBe(1);
    expect(drift.stdout).toContain(`1,2,${d.id},name,(sent value not kept),Changed in the CRM`);

    // A result recorded by an older version keeps no digest: only the file can say what was sent.
    const redis = h.runtime.redis;
    const bucket = (await redis.keys(`${h.config.prefix}:run:*:${id}:results:*`))[0]!;
    const stored = (await redis.hget(bucket, '1'))!;
    await redis.hset(bucket, '1', stored.replace(/,"v":"[^"]*"/, ''));
    const res = await cli(['verify', id]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(
      /v\.csv changed since run \S+ began .*without a digest of what they sent.*it cannot check this run \[RUN_STATE\]/,
    );
  }, 60_000);
});

describe('a CRM answer off the spec (issue 43)', () => {
  let off: Harness;
  beforeAll(async () => {
    off = await startHarness({ records: 5, crmProxy: true });
  });
  afterAll(async () => off?.close());
  const offCli = cliFor(() => off);

  it('reconcile exits 8 naming the request, not 4 ("Redis unreachable or an unexpected error")', async () => {
    off.proxy!.setRules([
      { method: 'GET', path: /\/v2\/contacts$/, rewriteAnswer: () => ({ contacts: 'not a list', pagination: {} }) },
    ]);
    const file = off.file('bad-answer.csv', csv(['email', 'name'], [['a@example.com', 'A']]));
    const res = await offCli(['reconcile', file, '--op', 'contact.update', '-w', 'acme']);
    expect(res.stderr).toMatch(
      /GET \/api\/external\/v2\/contacts\?page_number=1.*does not match the schema.*\[CRM_BAD_RESPONSE\]/,
    );
    expect(res.stderr).not.toMatch(/^\s+at /m);
    expect(res.code).toBe(8);
    const help = await offCli(['--help']);
    expect(help.stdout).toMatch(/^ {2}8 {2}the CRM answered in a way its spec does not allow/m);
  }, 30_000);

  it('import --work --json into a workspace an earlier 401 blocked says so on stderr, as the text mode does', async () => {
    const d = [...off.ws.deals.values()][0]!;
    const file = off.file('blocked.csv', csv(['id', 'name'], [[d.id, 'Blocked']]));
    const args = ['import', file, '--op', 'deal.update', '-w', 'acme', '--work'];
    // A worker (whose start-up key check is off) meets the 401: the workspace is blocked.
    off.ws.revokeApiKey(off.apiKey);
    const pool = await off.startWorkers({ concurrency: 1 });
    try {
      const first = await off.importFile(file, 'deal.update');
      expect((await off.waitForRun(first.id, 20_000, (r) => r.status === 'blocked')).status).toBe('blocked');
    } finally {
      await pool.close();
      off.ws.addApiKey(off.apiKey);
    }
    // The workspace stays blocked until resumed: a second import's rows wait.
    const run = harnessArgs(off, [...args, '--json']);
    const cli = startCli(run.args, run.env);
    try {
      for (let i = 0; i < 300 && !/workspace acme is blocked/.test(cli.stderr); i++) await sleep(100);
      expect(cli.stderr).toMatch(/workspace acme is blocked: /);
      // stdout stays for the one JSON document at the end.
      expect(cli.stdout).toBe('');
    } finally {
      cli.child.kill('SIGTERM');
      await cli.exited;
    }
  }, 60_000);
});
