import { describe, expect, it } from 'vitest';
import { ERROR_CODES, ERRORS, type ErrorCode } from '../../src/errors/index.js';
import { readDoc } from './markdown.js';

/* docs/troubleshooting.md's table of error codes: one row per code of the registry, in its words, with its exit code and HTTP status, each with what to do. */

function tableRows(): Map<string, string[]> {
  const page = readDoc('docs/troubleshooting.md');
  const from = page.indexOf('<!-- error-codes:start -->');
  const to = page.indexOf('<!-- error-codes:end -->');
  expect(from).toBeGreaterThan(0);
  expect(to).toBeGreaterThan(from);
  const rows = new Map<string, string[]>();
  for (const line of page.slice(from, to).split('\n')) {
    const m = /^\| `([A-Z_]+)` \|(.*)\|\s*$/.exec(line);
    if (m)
      rows.set(
        m[1]!,
        m[2]!.split(' | ').map((c) => c.trim()),
      );
  }
  return rows;
}

describe('docs/troubleshooting.md error codes', () => {
  it('has a row for every code of the registry and none other, with its meaning, exit code, HTTP status and what to do', () => {
    const rows = tableRows();
    expect([...rows.keys()].sort()).toEqual(Object.keys(ERROR_CODES).sort());
    for (const [code, meaning] of Object.entries(ERROR_CODES) as Array<[ErrorCode, string]>) {
      const [shown, exit, http, todo] = rows.get(code) ?? [];
      expect(shown, code).toBe(meaning);
      expect(exit, `${code}: exit code`).toBe(String(ERRORS[code].exit));
      expect(http, `${code}: HTTP status`).toBe(String(ERRORS[code].http));
      expect(todo?.length ?? 0, `${code}: what to do`).toBeGreaterThan(10);
    }
  });
});
