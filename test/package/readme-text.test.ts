import { describe, expect, it } from 'vitest';
import { docFiles, readDoc } from '../docs/markdown.js';

/*
 * What a new user reads first: the README and the docs pages it links to. Their tables render as
 * tables, the README stays short, and they tell nothing untrue.
 */

const README = readDoc('README.md');
const DOCS = new Map(docFiles().map((f) => [f, readDoc(f)]));
const ALL = [...DOCS.values()].join('\n');

/** Table rows that render as text: a `| … |` line neither under a table's header nor part of one. */
export function strayTableRows(markdown: string): string[] {
  const lines = markdown.split('\n');
  const isRow = (l: string | undefined) => l !== undefined && /^\s*\|.*\|\s*$/.test(l);
  const isRule = (l: string | undefined) => l !== undefined && /^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$/.test(l);
  const stray: string[] = [];
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced || !isRow(line)) continue;
    const header = isRule(lines[i + 1]);
    const inTable = isRow(lines[i - 1]);
    if (!header && !inTable) stray.push(`line ${i + 1}: ${line.trim().slice(0, 60)}`);
  }
  return stray;
}

describe('README and docs/', () => {
  it.each([...DOCS.keys()])('%s has no table row outside its table', (file) => {
    expect(strayTableRows(DOCS.get(file)!)).toEqual([]);
  });

  it('finds a stray table row', () => {
    expect(strayTableRows('| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n| 3 | 4 |')).toEqual(['line 6: | 3 | 4 |']);
  });

  it('keeps the README what a newcomer reads in ten minutes: at most 350 lines, the two setup commands first', () => {
    expect(README.split('\n').length).toBeLessThanOrEqual(350);
    const quickStart = README.slice(README.indexOf('## Quick start'));
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(quickStart)?.[1] ?? '';
    expect(firstBlock).toMatch(/^npm ci && npm run demo\s/m);
    expect(firstBlock).toMatch(/^npm test\s/m);
    // The quick start opens with the commands, not with Node version caveats.
    expect(quickStart.slice(0, quickStart.indexOf('```sh'))).not.toMatch(/EBADENGINE|Node 2\d/);
  });

  it('lists resultsDir and retention in the configuration table (docs/configuration.md)', () => {
    const table = /\| key \| meaning \|\n(?:\s*\|.*\|\n)+/.exec(DOCS.get('docs/configuration.md')!)?.[0] ?? '';
    expect(table).toContain('| `resultsDir` |');
    expect(table).toContain('| `retention` |');
  });

  it('does not tell to install crm-sync from the registry: it is not published', () => {
    expect(ALL).not.toMatch(/npm install crm-sync\b/);
    expect(DOCS.get('docs/library.md')).toMatch(/npm pack/);
  });

  it('claims no load-time rowsPerJob check (none exists)', () => {
    expect(ALL).not.toMatch(/`rowsPerJob` 1 with a/);
  });

  it('says an import without --wait runs until its last row is queued (docs/imports.md)', () => {
    expect(DOCS.get('docs/imports.md')).toMatch(/Without `--wait`[^.]*runs until the last row of the file is queued/);
  });

  it('gives every docs page a title and a link back to the README', () => {
    for (const [file, text] of DOCS) {
      if (file === 'README.md') continue;
      expect(text, file).toMatch(/^# \S/);
      if (file === 'docs/architecture.md' || file === 'docs/extending.md') continue;
      expect(text, file).toContain('](../README.md)');
    }
  });
});
