import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { readDoc } from './markdown.js';

/*
 * "What is guaranteed" (docs/guarantees.md) is a contract with its readers, moved word for word
 * from the README. Changing a word of it is a decision, not an edit: this test fails until the
 * digest below is changed with it, in the same commit that says why.
 */
const CONTRACT_SHA256 = '70015a04d1193083b7e974f09082b9f9589f83ad2048aefe96036bc90ca1fc4e';

describe('docs/guarantees.md, "What is guaranteed"', () => {
  it('is the contract word for word', () => {
    const page = readDoc('docs/guarantees.md');
    const start = page.indexOf('<!-- guarantees:start -->');
    const end = page.indexOf('<!-- guarantees:end -->');
    expect(start).toBeGreaterThan(page.indexOf('## What is guaranteed'));
    expect(end).toBeGreaterThan(start);
    const text = page.slice(start + '<!-- guarantees:start -->'.length, end).trim();
    expect(text).toMatch(/^These hold with any number of worker processes/);
    expect(text).toContain('**One result per row, written once.**');
    expect(createHash('sha256').update(text).digest('hex')).toBe(CONTRACT_SHA256);
  });
});
