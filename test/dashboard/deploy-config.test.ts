import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFromObject } from '../../src/config/index.js';

const DEPLOY = join(import.meta.dirname, '..', '..', 'docs', 'deploy');
const read = (name: string): unknown => JSON.parse(readFileSync(join(DEPLOY, name), 'utf8'));

describe('config files mounted by docker-compose.yml', () => {
  it('the demo config points the acme workspace at the simulator with an env key', () => {
    const config = configFromObject(read('demo.config.json'), { source: 'demo.config.json', env: {} });
    expect(config.workspaces.acme).toMatchObject({ baseUrl: 'http://acme.localhost:4010/api/external', apiKeySource: { env: 'ACME_API_KEY' } });
    expect(config.redisUrl).toBe('redis://127.0.0.1:6379');
  });

  it('the production example reads the key and the dashboard token from Docker secrets', () => {
    const config = configFromObject(read('production.config.json'), { source: 'production.config.json', env: {} });
    expect(config.workspaces.acme?.apiKeySource).toEqual({ file: '/run/secrets/acme_api_key' });
    expect(config.dashboardTokenSource).toEqual({ file: '/run/secrets/dashboard_token' });
  });

  it('the compose file mounts the demo config by default and keeps Redis from evicting', () => {
    const compose = readFileSync(join(import.meta.dirname, '..', '..', 'docker-compose.yml'), 'utf8');
    expect(compose).toContain('${CRM_SYNC_CONFIG_FILE:-./docs/deploy/demo.config.json}:/config/crm-sync.config.json:ro');
    expect(compose).toContain('"--maxmemory-policy", "noeviction"');
    expect(compose).toContain('"--appendonly", "yes"');
  });
});
