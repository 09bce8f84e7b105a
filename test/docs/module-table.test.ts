import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, readDoc } from './markdown.js';

/* docs/architecture.md, "Modules": its table names every folder of src/, and only those (and index.ts). */

function tableModules(): string[] {
  const page = readDoc('docs/architecture.md');
  const from = page.indexOf('## Modules');
  const to = page.indexOf('\n## ', from + 1);
  expect(from).toBeGreaterThan(0);
  const names: string[] = [];
  for (const line of page.slice(from, to).split('\n')) {
    const m = /^\| `([a-z-]+\/|index\.ts)` \|/.exec(line);
    if (m) names.push(m[1]!);
  }
  return names;
}

describe("docs/architecture.md's module table", () => {
  it('names every folder of src/ once, and no folder that is not there', () => {
    const src = join(ROOT, 'src');
    const folders = readdirSync(src)
      .filter((f) => statSync(join(src, f)).isDirectory())
      .map((f) => `${f}/`);
    expect(folders.length).toBeGreaterThan(20);
    const named = tableModules();
    expect(new Set(named).size, 'each module once').toBe(named.length);
    expect(named.filter((n) => n.endsWith('/')).sort()).toEqual(folders.sort());
    expect(named).toContain('index.ts');
  });
});
