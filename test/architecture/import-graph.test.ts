import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SRC, circles, importGraph, importsOf, moduleGraph } from './import-graph.js';

/*
 * docs/architecture.md, "Modules": one direction of flow, no import cycles. The lint rule keeps
 * modules' surfaces; this keeps the graph of src/ free of circles, between files and between
 * modules, whether closed by a value import, a type import, a re-export or a dynamic import().
 */

describe('the import graph of src/', () => {
  const files = importGraph();

  it('is read whole: every kind of import is an edge', () => {
    // Not vacuous: a few hundred files, and each kind of import counts.
    expect(files.size).toBeGreaterThan(200);
    expect([...files.values()].reduce((n, d) => n + d.length, 0)).toBeGreaterThan(files.size);
    const here = `${import.meta.dirname}/x.ts`;
    const text = [
      "import { a } from './import-graph.js';",
      "import type { B } from './import-graph.js';",
      "export { c } from './import-graph.js';",
      "const d = () => import('./import-graph.js');",
    ].join('\n');
    expect(importsOf(here, text)).toHaveLength(4);
  });

  it('finds a circle where there is one, a type-only one too', () => {
    expect(
      circles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
    ).toEqual([['a', 'b', 'c']]);
    expect(circles(new Map([['a', ['a']]]))).toEqual([['a']]);
    expect(
      circles(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('has no circle between files', () => {
    expect(circles(files)).toEqual([]);
  });

  it('has no circle between modules', () => {
    expect(circles(moduleGraph(files))).toEqual([]);
  });
});

describe('where the library and the commands meet', () => {
  const files = importGraph();

  it("the library's index takes nothing from cli/: the CLI calls the library, not the other way", () => {
    expect(files.get('index.ts')!.length).toBeGreaterThan(5);
    expect(files.get('index.ts')!.filter((f) => f.startsWith('cli/'))).toEqual([]);
  });

  it('the CLI and the dashboard retry through the one retry path (retryRows), never retryRun itself', () => {
    const callers = ['cli/runs-actions.ts', 'dashboard/run-routes.ts', 'dashboard/upload-route.ts'];
    for (const file of callers) expect(readFileSync(join(SRC, file), 'utf8'), file).toMatch(/\bretryRows\(/);
    for (const file of files.keys())
      if (file.startsWith('cli/') || file.startsWith('dashboard/'))
        expect(readFileSync(join(SRC, file), 'utf8'), file).not.toMatch(/\bretryRun\(/);
  });
});
