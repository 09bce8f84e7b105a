import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest } from '../helpers/http.js';
import { startHarness, type Harness } from '../helpers/pipeline.js';
import { runCli } from '../helpers/run-cli.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 1 });
});
afterAll(async () => h?.close());

describe('crm-sync dashboard', () => {
  it('refuses to start without a token and says how to give one', async () => {
    const env = { ...h.env };
    delete env.CRM_SYNC_DASHBOARD_TOKEN;
    const res = await runCli(['--config', h.configPath, 'dashboard', '--port', '0'], env);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/needs a token: set CRM_SYNC_DASHBOARD_TOKEN.*--insecure-no-auth/);
  }, 30_000);

  it('refuses a token anyone can guess (32 × "a") before it connects anywhere, without printing it', async () => {
    const res = await runCli(['--config', h.configPath, 'dashboard', '--port', '0'], {
      ...h.env,
      CRM_SYNC_DASHBOARD_TOKEN: 'a'.repeat(32),
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toContain(
      'the dashboard token (CRM_SYNC_DASHBOARD_TOKEN) is one character repeated, which anyone can guess (make one with: openssl rand -hex 16)',
    );
    expect(res.stderr).not.toContain('a'.repeat(32));
  }, 30_000);

  it('on a port in use: exit 2 and one line that says so, no stack trace', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const res = await runCli(['--config', h.configPath, 'dashboard', '--host', '127.0.0.1', '--port', String(port)], {
        ...h.env,
        CRM_SYNC_DASHBOARD_TOKEN: 'cli-test-token-1234567890abcdef0123',
      });
      expect(res.code).toBe(2);
      expect(res.stderr).toContain(
        `the dashboard cannot listen on 127.0.0.1:${port}: the port is already in use (another crm-sync?); pick another with --port, or --port 0 for any free one`,
      );
      expect(res.stderr).not.toMatch(/unexpected error|^\s+at /m);
      expect(res.stderr.trim().split('\n')).toHaveLength(1);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  }, 30_000);

  it('starts with a token, answers /healthz, and stops on SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      ['bin/crm-sync.js', '--config', h.configPath, '--log-level', 'warn', 'dashboard', '--port', '0'],
      {
        env: { ...h.env, CRM_SYNC_DASHBOARD_TOKEN: 'cli-test-token-1234567890abcdef0123' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.resume();
    try {
      for (let i = 0; i < 300 && !/on http:\/\//.test(out); i++) await new Promise((r) => setTimeout(r, 50));
      const port = Number(/:(\d+)/.exec(out.slice(out.indexOf('http://')))?.[1]);
      expect(port).toBeGreaterThan(0);
      expect((await httpRequest({ port, host: `127.0.0.1:${port}`, path: '/healthz' })).status).toBe(200);
      expect((await httpRequest({ port, host: `127.0.0.1:${port}`, path: '/metrics' })).status).toBe(401);
    } finally {
      child.kill('SIGTERM');
    }
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
  }, 30_000);
});
