import { z } from 'zod';
import { ConfigFileSchema } from './config-schema.js';

/** Where the package ships the generated schema (relative to the package root). */
export const CONFIG_JSON_SCHEMA_PATH = 'schema/crm-sync.config.schema.json';

/**
 * The config file's JSON Schema, generated from the zod schema so the two cannot disagree
 * (`npm run schema` writes it; a test fails when the shipped file is stale). The input side:
 * fields with defaults are optional, as a person writing the file sees them. zod refinements
 * (an API key source exactly once, workspace names) are not expressible and stay runtime checks.
 */
export function configJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(ConfigFileSchema, { io: 'input', target: 'draft-2020-12' }),
    title: 'crm-sync configuration',
  };
}
