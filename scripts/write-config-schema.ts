// Writes the config file's JSON Schema (generated from the zod schema) where the package ships it.
import { writeFileSync } from 'node:fs';
import { CONFIG_JSON_SCHEMA_PATH, configJsonSchema } from '../src/config/index.js';

writeFileSync(
  new URL(`../${CONFIG_JSON_SCHEMA_PATH}`, import.meta.url),
  `${JSON.stringify(configJsonSchema(), null, 2)}\n`,
);
process.stdout.write(`wrote ${CONFIG_JSON_SCHEMA_PATH}\n`);
