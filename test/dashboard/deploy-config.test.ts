import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFromObject } from '../../src/config/index.js';
import { silentLogger } from '../../src/log/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import { httpRequest } from '../helpers/http.js';
import { startSimProcess } from '../helpers/sim-process.js';

const DEPLOY = join(import.meta.dirname, '..', '..', 'docs', 'deploy');
const read = (name: string): unknown => JSON.parse(readFileSync(join(DEPLOY, name), 'utf8'));

describe('config files mounted by docker-compose.yml', () => {
  it('the demo config points the acme workspace at the simulator by its network alias, with the demo key variable', () => {
    const config = configFromObject(read('demo.config.json'), { source: 'demo.config.json', env: {} });
    expect(config.workspaces.acme).toMatchObject({
      baseUrl: 'http://acme.sim:4010/api/external',
      apiKeySource: { env: 'SIM_KEY_ACME' },
    });
    expect(config.redisUrl).toBe('redis://redis:6379');
  });

  it('the production example reads the key and the dashboard token from Docker secrets', () => {
    const config = configFromObject(read('production.config.json'), { source: 'production.config.json', env: {} });
    expect(config.workspaces.acme?.apiKeySource).toEqual({ file: '/run/secrets/acme_api_key' });
    expect(config.dashboardTokenSource).toEqual({ file: '/run/secrets/dashboard_token' });
  });

  it('the compose file mounts the demo config by default and keeps Redis from evicting', () => {
    const compose = readFileSync(join(import.meta.dirname, '..', '..', 'docker-compose.yml'), 'utf8');
    expect(compose).toContain(
      '${CRM_SYNC_CONFIG_FILE:-./docs/deploy/demo.config.json}:/config/crm-sync.config.json:ro',
    );
    expect(compose).toContain('"--maxmemory-policy", "noeviction"');
    expect(compose).toContain('"--appendonly", "yes"');
  });

  it('production keys have no stand-in: an unset ACME_API_KEY reaches crm-sync empty and stops it with SECRET_MISSING', () => {
    const compose = readFileSync(join(import.meta.dirname, '..', '..', 'docker-compose.yml'), 'utf8');
    expect(compose).toContain('ACME_API_KEY: ${ACME_API_KEY:-}\n');
    expect(compose).not.toMatch(/ACME_API_KEY:-[^}]/);
    // What compose hands a production config that names ACME_API_KEY when the variable is unset.
    const raw = {
      redisUrl: 'redis://127.0.0.1:6379',
      workspaces: { acme: { baseUrl: 'https://acme.crm.example/api/external', apiKeyEnv: 'ACME_API_KEY' } },
    };
    const config = configFromObject(raw, { source: 'crm-sync.config.json', env: { ACME_API_KEY: '' } });
    expect(() => createCrmClient(config, 'acme', silentLogger)).toThrow(
      expect.objectContaining({ code: 'SECRET_MISSING' }),
    );
  });

  it('the demo simulator takes its key from the environment, not from its command line', () => {
    const compose = readFileSync(join(import.meta.dirname, '..', '..', 'docker-compose.yml'), 'utf8');
    const sim = compose.slice(compose.indexOf('\n  sim:'));
    expect(sim).toMatch(/command: \[.*"--workspace", "acme:env:SIM_KEY_ACME"/);
    expect(sim).not.toMatch(/command: .*sim-key-acme/);
  });

  it('docker-compose config accepts the file, with and without the demo profile, when no key variable is set', (ctx) => {
    const client = composeClient();
    if (!client) return ctx.skip();
    const env = { ...process.env };
    delete env.ACME_API_KEY;
    delete env.SIM_KEY_ACME;
    const cwd = join(import.meta.dirname, '..', '..');
    for (const profile of [[], ['--profile', 'demo']]) {
      expect(() =>
        execFileSync(client[0]!, [...client.slice(1), ...profile, 'config', '-q'], { cwd, env, stdio: 'pipe' }),
      ).not.toThrow();
    }
  });
});

/** `docker compose` or `docker-compose`, whichever works here; undefined when neither. */
function composeClient(): string[] | undefined {
  for (const cmd of [['docker', 'compose'], ['docker-compose']]) {
    try {
      execFileSync(cmd[0]!, [...cmd.slice(1), 'version'], { stdio: 'ignore' });
      return cmd;
    } catch {
      // try the next one
    }
  }
  return undefined;
}

describe('crm-sync sim --workspace name:env:VARIABLE', () => {
  const start = (args: string[], env: NodeJS.ProcessEnv) =>
    spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', 'sim', '--port', '0', '--records', '3', '--log-level', 'silent', ...args],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );

  it('reads the key from the variable, accepts it, and never prints it', async () => {
    const key = 'sim-env-key-5f2c9a';
    const { child, out, port } = await startSimProcess(['--records', '3', '--workspace', 'acme:env:SIM_TEST_KEY'], {
      ...process.env,
      SIM_TEST_KEY: key,
    });
    try {
      expect(out).toContain('X-Api-Key $SIM_TEST_KEY');
      expect(out).toContain(
        `curl -H "X-Api-Key: $SIM_TEST_KEY" 'http://acme.localhost:${port}/api/external/v2/contacts?page_size=5'`,
      );
      expect(out).not.toContain(key);
      const res = await httpRequest({
        port,
        host: `acme.localhost:${port}`,
        path: '/api/external/v2/contacts?page_size=1',
        headers: { 'x-api-key': key },
      });
      expect(res.status).toBe(200);
    } finally {
      child.kill('SIGTERM');
    }
    await once(child, 'exit');
  });

  it('with --domain sim serves acme.sim, the alias the compose network gives it, and acme.localhost still', async () => {
    const { child, port } = await startSimProcess(['--records', '1', '--domain', 'sim', '--workspace', 'acme:k1']);
    try {
      const get = (host: string) =>
        httpRequest({ port, host, path: '/api/external/v2/contacts?page_size=1', headers: { 'x-api-key': 'k1' } });
      expect((await get(`acme.sim:${port}`)).status).toBe(200);
      expect((await get(`acme.localhost:${port}`)).status).toBe(200);
      expect((await get(`sim:${port}`)).status).toBe(401);
      expect((await get(`acme.other:${port}`)).status).toBe(401);
    } finally {
      child.kill('SIGTERM');
    }
    await once(child, 'exit');
  });

  it('refuses a --domain that is not a DNS name', async () => {
    const child = start(['--domain', '10.0.0.1'], process.env);
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).not.toBe(0);
    expect(err).toContain('must be a DNS name');
  });

  it('refuses to start when the variable is not set', async () => {
    const env = { ...process.env };
    delete env.SIM_TEST_KEY;
    const child = start(['--workspace', 'acme:env:SIM_TEST_KEY'], env);
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).not.toBe(0);
    expect(err).toContain('env variable SIM_TEST_KEY (the key of workspace acme) is not set');
  });
});
