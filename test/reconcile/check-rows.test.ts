import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseMapping } from '../../src/ingest/index.js';
import { checkRows } from '../../src/reconcile/index.js';

const dir = mkdtempSync(join(tmpdir(), 'check-rows-'));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

describe("checkRows: every row checked by the planner's rules, without the CRM (issue 45)", () => {
  it('counts valid and invalid rows, with the line, the column label and the reason', async () => {
    const raw = { columns: { 'E-mail': 'email', 'Full name': 'name', Notes: null } };
    const invalid: Array<{ line: number; errors: Array<{ field: string; message: string }> }> = [];
    const result = await checkRows({
      file: file(
        'c.csv',
        'E-mail,Full name,Notes\na@b.example,A,x\nnot-an-address,B,y\n,C,z\n"q@r.example",D\u0001,w\n',
      ),
      op: 'contact.update',
      workspace: 'acme',
      mapping: { mapping: parseMapping(raw, 'test'), raw },
      onInvalid: (row) => void invalid.push({ line: row.line, errors: row.errors }),
    });
    expect(result).toMatchObject({ rows: 4, valid: 1, invalid: 3, columns: ['E-mail', 'Full name', 'Notes'] });
    expect(invalid.map((r) => [r.line, r.errors.map((e) => e.field)])).toEqual([
      [3, ['E-mail (email)']],
      [4, ['E-mail']],
      [5, ['Full name (name)']],
    ]);
    expect(invalid[1]!.errors[0]!.message).toContain('a row needs an id or a email to match');
  });

  it("a deal update without a name is valid: the plan takes the CRM's, as it does when planning", async () => {
    const result = await checkRows({
      file: file('d.csv', 'unique_number,value\nU-1,100\nU-2,lots\n'),
      op: 'deal.update',
      workspace: 'acme',
    });
    expect(result).toMatchObject({ rows: 2, valid: 1, invalid: 1 });
  });

  it('refuses the header as the plan would: a column that maps to nothing, the key column missing', async () => {
    await expect(
      checkRows({ file: file('e.csv', 'name,Surprise\nA,B\n'), op: 'contact.update', workspace: 'acme' }),
    ).rejects.toThrow(/reconcile matches contacts by email[\s\S]*Surprise/);
  });
});
