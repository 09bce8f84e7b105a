import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RUN_OPERATIONS } from '../../src/crm/index.js';
import { SRC, sourceFiles } from '../architecture/import-graph.js';

/*
 * docs/extending.md's guards, run: the operation table answers every per-operation question
 * (row shape, batching, creates, syncs, required fields), and callers never ask which kind of
 * source they hold. A new comparison of an operation's name, or a new test of a source's kind,
 * outside the modules that own them fails here, naming its line.
 */

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const names = RUN_OPERATIONS.map(escape).join('|');
const prefixes = [...new Set(RUN_OPERATIONS.map((op) => op.split('.')[0]!))].map(escape).join('|');
/** `=== 'deal.create'`, `'team.invite' !==`, `case 'deal.update'`, `.startsWith('deal.')`, `.has('…')`, `.includes('…')`. */
const BY_NAME = new RegExp(
  [
    `[!=]==\\s*['"\`](${names})['"\`]`,
    `['"\`](${names})['"\`]\\s*[!=]==`,
    `case\\s+['"\`](${names})['"\`]`,
    `startsWith\\(\\s*['"\`](${prefixes})\\.`,
    `\\.(has|includes)\\(\\s*['"\`](${names})['"\`]`,
  ].join('|'),
);
const BY_SOURCE_KIND =
  /typeof (source|file|options\.file|def\.source) [!=]==|instanceof PostgresSourceReader|format [!=]== 'postgres'/;

/**
 * By-name comparisons kept on purpose, each with its reason beside it in the code (at most 3).
 * An entry is `path: the line's text, trimmed`.
 */
const KEPT_BY_NAME: readonly string[] = [];

function hits(pattern: RegExp, skip: (path: string) => boolean): string[] {
  const found: string[] = [];
  for (const file of sourceFiles()) {
    const path = relative(SRC, file);
    if (skip(path)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const text = line.trim();
      // Comments may name operations: only code decides.
      if (text.startsWith('//') || text.startsWith('*') || text.startsWith('/*')) continue;
      if (pattern.test(text)) found.push(`${path}: ${text}`);
    }
  }
  return found;
}

describe('operations are decided by the operation table', () => {
  it('finds a comparison by name where there is one', () => {
    for (const line of [
      "if (op === 'deal.create') return 1;",
      "run.operation !== 'team.invite' &&",
      "case 'lead.update':",
      "opts.op.startsWith('deal.')",
      "new Set(['x']).has('contact.update')",
      "'deal.upsert' === op",
    ])
      expect(BY_NAME.test(line), line).toBe(true);
    expect(BY_NAME.test("client.write('deal.create', fields)")).toBe(false);
    expect(BY_NAME.test("runShape(op) === 'create'")).toBe(false);
  });

  it('has no comparison of an operation name outside the table and the simulator, but the ones kept', () => {
    expect(KEPT_BY_NAME.length).toBeLessThanOrEqual(3);
    const found = hits(BY_NAME, (p) => p.startsWith('sim/') || p === 'crm/operation-table.ts');
    expect(found).toEqual([...KEPT_BY_NAME]);
  });
});

describe('sources are asked what they say of themselves', () => {
  it('no module outside ingest/ tests which kind of source it holds', () => {
    expect(BY_SOURCE_KIND.test("typeof options.file === 'string'")).toBe(true);
    expect(hits(BY_SOURCE_KIND, (p) => p.startsWith('ingest/'))).toEqual([]);
  });
});
