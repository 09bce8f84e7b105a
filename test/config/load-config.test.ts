import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { configFromObject, getWorkspace, loadConfig, readApiKey, Secret } from '../../src/config/index.js';
import { isCrmSyncError } from '../../src/errors/index.js';

const dir = mkdtempSync(join(tmpdir(), 'crm-sync-config-'));
const empty = mkdtempSync(join(tmpdir(), 'crm-sync-empty-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(empty, { recursive: true, force: true });
});
const write = (name: string, content: string) => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};

const valid = {
  workspaces: {
    acme: {
      baseUrl: 'http://acme.localhost:4010/api/external/',
      apiKeyEnv: 'ACME_KEY',
      rateLimit: { max: 50, durationMs: 1000 },
    },
    globex: { baseUrl: 'https://globex.crm.example/api/external', apiKeyFile: 'globex.key' },
  },
};

describe('config', () => {
  it('loads the documented shape, env wins for REDIS_URL, paths resolve next to the file', () => {
    write('globex.key', 'globex-secret\n');
    const path = write('crm-sync.config.json', JSON.stringify(valid));
    const config = loadConfig({ path, env: { REDIS_URL: 'redis://10.0.0.9:6380' } });
    expect(config.source).toBe(path);
    expect(config.redisUrl).toBe('redis://10.0.0.9:6380');
    const acme = getWorkspace(config, 'acme');
    expect(acme.baseUrl).toBe('http://acme.localhost:4010/api/external');
    expect(acme.rateLimit).toEqual({ max: 50, durationMs: 1000 });
    expect(acme.listVersion).toBe('v2');
    expect(readApiKey(acme, { ACME_KEY: 'acme-secret' }).reveal()).toBe('acme-secret');
    expect(readApiKey(getWorkspace(config, 'globex'), {}).reveal()).toBe('globex-secret');
  });

  it('rows per job: 10 with or without a known rate limit (its budget counts requests, not jobs), or as set', () => {
    const config = configFromObject(valid, { source: 'c.json', env: {} });
    expect(getWorkspace(config, 'acme').rowsPerJob).toBe(10);
    expect(getWorkspace(config, 'globex').rowsPerJob).toBe(10);
    const tuned = { workspaces: { acme: { ...valid.workspaces.acme, rowsPerJob: 25 } } };
    expect(getWorkspace(configFromObject(tuned, { source: 'c.json', env: {} }), 'acme').rowsPerJob).toBe(25);
    const wrong = { workspaces: { acme: { ...valid.workspaces.acme, rowsPerJob: 0 } } };
    expect(() => configFromObject(wrong, { source: 'c.json', env: {} })).toThrow(/rowsPerJob/);
  });

  it('uses CRM_SYNC_CONFIG, and defaults when no file exists', () => {
    const path = write('other.json', JSON.stringify(valid));
    expect(loadConfig({ env: { CRM_SYNC_CONFIG: path }, cwd: dir }).source).toBe(path);
    const defaults = loadConfig({ env: {}, cwd: empty });
    expect(defaults.source).toBeNull();
    expect(defaults.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(defaults.workspaces).toEqual({});
  });

  it('names the wrong key and says how to fix it', () => {
    const bad = { workspaces: { acme: { baseUrl: 'not a url', apiKeyEnv: 'K', apiKeyFile: 'f', extra: 1 } } };
    try {
      configFromObject(bad, { source: 'crm-sync.config.json' });
      expect.unreachable();
    } catch (err) {
      expect(isCrmSyncError(err, 'CONFIG_INVALID')).toBe(true);
      const message = (err as Error).message;
      expect(message).toContain('crm-sync.config.json is invalid');
      expect(message).toContain('workspaces.acme.baseUrl');
      expect(message).toContain('http(s) URL');
      expect(message).toContain('extra');
    }
    expect(() => configFromObject({ workspaces: { 'a:b': valid.workspaces.acme } }, { source: 'x' })).toThrow(
      /letters, digits/,
    );
    expect(() => configFromObject({ workspaces: { acme: { baseUrl: 'http://x' } } }, { source: 'x' })).toThrow(
      /exactly one of apiKeyEnv/,
    );
  });

  it('reports a missing explicit file, bad JSON and unknown workspaces clearly', () => {
    expect(() => loadConfig({ path: join(dir, 'nope.json'), env: {} })).toThrow(/does not exist/);
    const broken = write('broken.json', '{"workspaces": ');
    expect(() => loadConfig({ path: broken, env: {} })).toThrow(/not valid JSON/);
    const config = configFromObject(valid, { source: 'c.json', env: {} });
    expect(() => getWorkspace(config, 'initech')).toThrow(/configured: acme, globex/);
  });

  it('never shows a secret: missing key errors name the source, Secret prints redacted', () => {
    const config = configFromObject(valid, { source: 'c.json', env: {}, baseDir: dir });
    expect(() => readApiKey(getWorkspace(config, 'acme'), {})).toThrow(/env variable ACME_KEY is not set/);
    const secret = new Secret('sk_live_abc');
    expect(String(secret)).toBe('[redacted]');
    expect(JSON.stringify({ secret })).toBe('{"secret":"[redacted]"}');
    expect(inspect({ secret })).not.toContain('sk_live_abc');
    expect(`${secret}`).not.toContain('sk_live_abc');
  });
});

describe('naming a Redis Cluster', () => {
  const opts = (env: NodeJS.ProcessEnv) => ({ source: null, env, baseDir: dir });

  it('REDIS_CLUSTER_NODES wins over the file and over REDIS_URL; without either there is none', () => {
    const file = { ...valid, redisCluster: { nodes: ['10.0.0.1:7000'], passwordEnv: 'REDIS_PW', tls: true } };
    const fromFile = configFromObject(file, opts({}));
    expect(fromFile.redisCluster).toEqual({
      nodes: [{ host: '10.0.0.1', port: 7000 }],
      password: { env: 'REDIS_PW' },
      tls: true,
    });
    const fromEnv = configFromObject(
      file,
      opts({ REDIS_CLUSTER_NODES: 'a.example:6379, [::1]:7001', REDIS_URL: 'redis://x' }),
    );
    expect(fromEnv.redisCluster?.nodes).toEqual([
      { host: 'a.example', port: 6379 },
      { host: '::1', port: 7001 },
    ]);
    expect(configFromObject(valid, opts({ REDIS_URL: 'redis://x' })).redisCluster).toBeNull();
  });

  it('says what is wrong with a seed node, and keeps a password given in the file out of every printout', () => {
    const bad = (env: NodeJS.ProcessEnv, extra: object = {}) => {
      try {
        configFromObject({ ...valid, ...extra }, opts(env));
      } catch (err) {
        return isCrmSyncError(err) ? `${err.code}: ${err.message}` : String(err);
      }
      return 'accepted';
    };
    expect(bad({ REDIS_CLUSTER_NODES: '10.0.0.1' })).toMatch(/CONFIG_INVALID: .*"10\.0\.0\.1" is not host:port/);
    expect(bad({ REDIS_CLUSTER_NODES: '10.0.0.1:99999' })).toMatch(/not host:port/);
    expect(bad({}, { redisCluster: {} })).toMatch(/names no seed nodes/);
    expect(bad({ CRM_SYNC_PREFIX: 'app{1}' })).toMatch(/CONFIG_INVALID: CRM_SYNC_PREFIX "app\{1\}" .*no braces/);
    expect(bad({}, { redisCluster: { nodes: ['h:1'], password: 'p', passwordEnv: 'P' } })).toMatch(/not both/);
    const config = configFromObject(
      { ...valid, redisCluster: { nodes: ['h:1'], password: 'hunter2-cluster' } },
      opts({}),
    );
    expect(JSON.stringify(config)).not.toContain('hunter2-cluster');
    expect(inspect(config, { depth: 5 })).not.toContain('hunter2-cluster');
  });
});
