import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../src/crm/index.js';
import { fieldsOf, fieldTable } from '../../src/ingest/index.js';

const START = '<!-- fields:start -->';
const END = '<!-- fields:end -->';

/**
 * The field table in docs/imports.md (moved there from the README) is generated from the row
 * schemas; this test fails when they differ.
 * Regenerate it with: UPDATE_README=1 npx vitest run test/ingest/readme-fields.test.ts
 */
const PAGE = 'docs/imports.md';

describe('field table (docs/imports.md)', () => {
  it('is what the schemas say, for every field of every operation', () => {
    const readme = readFileSync(PAGE, 'utf8');
    const from = readme.indexOf(START);
    const to = readme.indexOf(END);
    expect(from).toBeGreaterThan(0);
    expect(to).toBeGreaterThan(from);
    const table = fieldTable();
    if (process.env.UPDATE_README === '1') {
      writeFileSync(PAGE, `${readme.slice(0, from + START.length)}\n${table}\n${readme.slice(to)}`);
      return;
    }
    expect(readme.slice(from + START.length, to).trim()).toBe(table);
    for (const op of OPERATIONS)
      for (const field of fieldsOf(op)) expect(table).toContain(`| \`${op}\` | \`${field}\` |`);
    // deal.update needs a name (spec): the table says so.
    expect(table).toContain('| `deal.update` | `name` | yes |');
  });
});
