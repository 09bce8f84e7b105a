import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/* What a new user reads first: the README's tables render as tables, and it tells nothing untrue. */

const README = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');

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

describe('README', () => {
  it('has no table row outside its table', () => {
    expect(strayTableRows(README)).toEqual([]);
    expect(strayTableRows('| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n| 3 | 4 |')).toEqual(['line 6: | 3 | 4 |']);
  });

  it('lists resultsDir and retention in the configuration table', () => {
    const table = /\| key \| meaning \|\n(?:\s*\|.*\|\n)+/.exec(README)?.[0] ?? '';
    expect(table).toContain('| `resultsDir` |');
    expect(table).toContain('| `retention` |');
  });

  it('does not tell to install crm-sync from the registry: it is not published', () => {
    expect(README).not.toMatch(/npm install crm-sync\b/);
    expect(README).toMatch(/npm pack/);
  });

  it('claims no load-time rowsPerJob check (none exists)', () => {
    expect(README).not.toMatch(/`rowsPerJob` 1 with a/);
  });

  it('says an import without --wait runs until its last row is queued', () => {
    expect(README).toMatch(/Without `--wait`[^.]*runs until the last row of the file is queued/);
  });
});
