import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { CONFIG_JSON_SCHEMA_PATH, configJsonSchema, loadConfig } from '../../src/config/index.js';

const shipped = JSON.parse(
  readFileSync(new URL(`../../${CONFIG_JSON_SCHEMA_PATH}`, import.meta.url), 'utf8'),
) as Record<string, unknown>;
const validate = new Ajv2020({ strict: false }).compile(shipped);

describe('the config JSON Schema', () => {
  it('the shipped file is what the zod schema generates (run `npm run schema` after changing it)', () => {
    expect(shipped).toEqual(configJsonSchema());
  });

  it('accepts the deploy examples (with their $schema) and rejects what the loader rejects', () => {
    for (const name of ['demo.config.json', 'production.config.json']) {
      const raw: unknown = JSON.parse(readFileSync(new URL(`../../docs/deploy/${name}`, import.meta.url), 'utf8'));
      expect(validate(raw), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
    expect(validate({ workspaces: { acme: { baseUrl: 'https://x.example/api', apiKeyEnv: 'K', rateLimt: {} } } })).toBe(
      false,
    );
    expect(validate.errors?.[0]?.params).toMatchObject({ additionalProperty: 'rateLimt' });
    expect(
      validate({
        workspaces: {
          acme: { baseUrl: 'https://x.example/api', apiKeyEnv: 'K', rateLimit: { max: 0, durationMs: 1000 } },
        },
      }),
    ).toBe(false);
  });

  it('a config file may name its schema in `$schema`', () => {
    const dir = mkdtempSync(join(tmpdir(), 'crm-sync-schema-'));
    const path = join(dir, 'crm-sync.config.json');
    const raw = {
      $schema: './node_modules/@crm-sync/cli/schema/crm-sync.config.schema.json',
      workspaces: { acme: { baseUrl: 'https://acme.crm.example/api/external', apiKeyEnv: 'ACME_API_KEY' } },
    };
    writeFileSync(path, JSON.stringify(raw));
    expect(validate(raw)).toBe(true);
    expect(loadConfig({ path, env: { ACME_API_KEY: 'k' } }).workspaces.acme?.baseUrl).toBe(
      'https://acme.crm.example/api/external',
    );
  });
});
