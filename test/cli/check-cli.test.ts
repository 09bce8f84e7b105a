import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactRedisUrl } from '../../src/redis/index.js';
import { freePort } from '../../src/runtime/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { TEST_REDIS_URL } from '../helpers/redis.js';
import { runCli } from '../helpers/run-cli.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 10 });
});
afterAll(async () => h?.close());

const keyEnv = () => Object.keys(h.env).find((k) => k.startsWith('CRM_SYNC_TEST_KEY_'))!;
const cli = (args: string[], env: NodeJS.ProcessEnv = {}, config = h.configPath) =>
  runCli(['--config', config, '--log-level', 'warn', ...args], { ...h.env, CI: 'true', ...env }, 60_000);
/** A copy of the harness config with the workspace's baseUrl replaced. */
function configWithBaseUrl(name: string, baseUrl: string): string {
  const raw = JSON.parse(readFileSync(h.configPath, 'utf8')) as { workspaces: { acme: { baseUrl: string } } };
  raw.workspaces.acme.baseUrl = baseUrl;
  const path = join(h.dir, name);
  writeFileSync(path, JSON.stringify(raw));
  return path;
}

describe('crm-sync check (preflight)', () => {
  it('passes against the simulator and real Redis, warning that no worker serves the workspace', async () => {
    const res = await cli(['check', '-w', 'acme']);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^ok {4}config: .* is valid/m);
    expect(res.stdout).toContain('is valid (1 workspace)');
    // The Redis the suite was pointed at (REDIS_URL, database number and port included), as printed.
    expect(res.stdout).toContain(`\nok    redis: ${redactRedisUrl(TEST_REDIS_URL)} answers (Redis `);
    expect(res.stdout).toMatch(/^ok {4}acme: crm: .* answered like the CRM and accepted the key/m);
    expect(res.stdout).toMatch(/^warn {2}acme: workers: no worker serves the workspace/m);
    expect(res.stdout + res.stderr).not.toContain(h.apiKey);
  }, 60_000);

  it('fails a key the CRM refuses, a baseUrl that answers 404, and one where nothing listens', async () => {
    const wrongKey = await cli(['check', '-w', 'acme', '--json'], { [keyEnv()]: 'not-the-key' });
    expect(wrongKey.code).toBe(2);
    expect(JSON.parse(wrongKey.stdout)).toContainEqual(
      expect.objectContaining({
        level: 'fail',
        subject: 'acme: crm',
        message: expect.stringMatching(/refused the API key \(HTTP 401/),
      }),
    );
    expect(wrongKey.stdout).not.toContain('not-the-key');

    const typo = await cli(
      ['check', '-w', 'acme'],
      {},
      configWithBaseUrl('typo.json', `${h.sim.baseUrl('acme')}/typo`),
    );
    expect(typo.code).toBe(2);
    expect(typo.stdout).toMatch(/^fail {2}acme: crm: .*\/typo answered 404 to the deal list .*is the baseUrl right/m);

    const nobody = await cli(
      ['check', '-w', 'acme'],
      {},
      configWithBaseUrl('closed.json', `http://127.0.0.1:${await freePort()}/acme`),
    );
    expect(nobody.code).toBe(2);
    expect(nobody.stdout).toMatch(/^fail {2}acme: crm: .* did not answer/m);
  }, 90_000);

  it('fails (exit 4) when Redis cannot be reached', async () => {
    const res = await cli(['check', '-w', 'acme'], { REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    expect(res.code).toBe(4);
    expect(res.stdout).toMatch(/^fail {2}redis: .* cannot be reached/m);
  }, 60_000);
});

describe('crm-sync check with nothing to run (issue 31)', () => {
  /** `crm-sync check` started in `cwd`, as a new user runs it in an empty folder. */
  function checkIn(cwd: string, globals: string[] = [], env: NodeJS.ProcessEnv = {}) {
    const childEnv: NodeJS.ProcessEnv = { ...h.env, CI: 'true', ...env };
    delete childEnv.CRM_SYNC_CONFIG;
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((done) => {
      execFile(
        process.execPath,
        [resolve('bin/crm-sync.js'), ...globals, '--log-level', 'warn', 'check'],
        { cwd, env: childEnv, timeout: 60_000 },
        (err, stdout, stderr) =>
          done({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr }),
      );
    });
  }

  it('fails (exit 2) without a config file, saying where it looked', async () => {
    const empty = mkdtempSync(join(h.dir, 'empty-'));
    const res = await checkIn(empty);
    expect(res.code).toBe(2);
    expect(res.stdout).toContain(
      `fail  config: no config file: looked for ${join(empty, 'crm-sync.config.json')} (neither --config nor CRM_SYNC_CONFIG is set)`,
    );
    expect(res.stdout).not.toContain('is valid');
  }, 60_000);

  it('fails (exit 2) with a config of zero workspaces, naming the file', async () => {
    const path = join(h.dir, 'no-workspaces.json');
    writeFileSync(path, JSON.stringify({ workspaces: {} }));
    const res = await checkIn(h.dir, ['--config', path]);
    expect(res.code).toBe(2);
    expect(res.stdout).toContain(`fail  config: ${path} names no workspaces`);
  }, 60_000);

  it('fails (exit 2) on a dashboard token anyone can guess, without printing it', async () => {
    const res = await cli(['check', '-w', 'acme'], { CRM_SYNC_DASHBOARD_TOKEN: 'a'.repeat(32) });
    expect(res.code).toBe(2);
    expect(res.stdout).toContain(
      'fail  dashboard: the dashboard token (CRM_SYNC_DASHBOARD_TOKEN) is one character repeated',
    );
    expect(res.stdout + res.stderr).not.toContain('a'.repeat(32));
  }, 60_000);
});

describe('workers and a key the CRM refuses', () => {
  it('a worker started with a refused key exits 3 without pausing the workspace for the others', async () => {
    const res = await cli(['worker', '-w', 'acme'], { [keyEnv()]: 'not-the-key' });
    expect(res.code).toBe(3);
    expect(res.stderr).toMatch(/workspace acme: the CRM refused the API key .*This worker does not start/);
    expect(await h.runtime.queue('acme').isPaused()).toBe(false);
  }, 60_000);

  it('import --work with the key variable unset says SECRET_MISSING and exits 2 instead of hanging', async () => {
    const d = [...h.ws.deals.values()][0]!;
    const started = Date.now();
    const res = await cli(
      ['import', h.file('s.csv', csv(['id', 'name'], [[d.id, 'S']])), '--op', 'deal.update', '-w', 'acme', '--work'],
      { [keyEnv()]: '' },
    );
    expect(res.stderr).toMatch(/SECRET_MISSING/);
    expect(res.code).toBe(2);
    // Figure for the report, not a timing assertion: the bound is runCli's own time limit.
    process.stdout.write(`import --work with SECRET_MISSING exited after ${Date.now() - started} ms\n`);
  }, 60_000);
});
