import { describe, expect, it } from 'vitest';
import { isCrmSyncError } from '../../src/errors/index.js';
import { openSource, type SourceItem } from '../../src/ingest/index.js';
import { collect, fixtureDir, iterationError, plain } from './fixtures.js';

const files = fixtureDir();

async function read(name: string, content: string, options = {}): Promise<SourceItem[]> {
  return plain(await collect(openSource(await files.write(name, content), options)));
}

describe('CSV reader', () => {
  it('strips a UTF-8 BOM and keeps header order', async () => {
    const path = await files.write('bom.csv', '\uFEFFid,name,value\n1,Alpha,10\n');
    const reader = openSource(path);
    const items = plain(await collect(reader));
    expect(reader.columns).toEqual(['id', 'name', 'value']);
    expect(items).toEqual([
      {
        kind: 'record',
        row: 1,
        line: 2,
        values: { id: '1', name: 'Alpha', value: '10' },
        original: { id: '1', name: 'Alpha', value: '10' },
      },
    ]);
    expect(reader.bytesRead).toBe(reader.totalBytes);
    expect(reader.totalBytes).toBeGreaterThan(0);
  });

  it('reads quoted fields with delimiters, doubled quotes and line breaks, and keeps line numbers right after them', async () => {
    const csv = [
      'id,name,notes',
      '1,"Smith, John","said ""hi"""',
      '2,"two',
      'lines","three',
      'more',
      'lines"',
      '3,plain,5" screen',
      '',
      '4,last,x',
    ].join('\r\n');
    const items = await read('quoted.csv', csv);
    expect(items.map((i) => [i.row, i.line])).toEqual([
      [1, 2],
      [2, 3],
      [3, 7],
      [4, 9],
    ]);
    expect(items[0]).toMatchObject({ values: { name: 'Smith, John', notes: 'said "hi"' } });
    expect(items[1]).toMatchObject({ values: { name: 'two\r\nlines', notes: 'three\r\nmore\r\nlines' } });
    expect(items[2]).toMatchObject({ values: { notes: '5" screen' } });
  });

  it('accepts LF and old-Mac CR line ends', async () => {
    expect((await read('lf.csv', 'a,b\n1,2\n3,4')).map((i) => [i.line, i.kind])).toEqual([
      [2, 'record'],
      [3, 'record'],
    ]);
    const cr = await read('cr.csv', 'a,b\r1,2\r"x\ry",4\r5,6\r');
    expect(cr.map((i) => i.line)).toEqual([2, 3, 5]);
    expect(cr[1]).toMatchObject({ values: { a: 'x\ry' } });
  });

  it('reads ";" delimited files with --delimiter and .tsv files with tabs', async () => {
    const semi = await read('semi.csv', 'id;value\n1;12,5\n', { delimiter: ';' });
    expect(semi[0]).toMatchObject({ values: { id: '1', value: '12,5' } });
    const tsv = await read('tabs.tsv', 'id\tname\n7\tA, B\n');
    expect(tsv[0]).toMatchObject({ values: { id: '7', name: 'A, B' } });
  });

  it('turns a row with the wrong number of fields into a problem and carries on', async () => {
    const csv = 'a,b,c,d,e\n1,2,3,4,5\n1,2,3,4,5,6,7\n1,2\n9,9,9,9,9\n';
    const items = await read('count.csv', csv);
    expect(items.map((i) => i.kind)).toEqual(['record', 'problem', 'problem', 'record']);
    expect(items.map((i) => i.row)).toEqual([1, 2, 3, 4]);
    expect(items[1]).toMatchObject({
      code: 'INPUT_PARSE',
      line: 3,
      message: expect.stringContaining('line 3: expected 5 fields, found 7'),
    });
    expect(items[1]?.original).toMatchObject({ a: '1', e: '5', _extra_6: '6', _extra_7: '7' });
    expect(items[2]).toMatchObject({
      line: 4,
      message: 'line 4: expected 5 fields, found 2',
      original: { a: '1', b: '2' },
    });
  });

  it('reports a bad closing quote as a row problem and resumes at the next line', async () => {
    const items = await read('badquote.csv', 'a,b\n1,2\n"3"x,4\n5,6\n');
    expect(items.map((i) => [i.row, i.line, i.kind])).toEqual([
      [1, 2, 'record'],
      [2, 3, 'problem'],
      [3, 4, 'record'],
    ]);
    expect(items[1]).toMatchObject({
      code: 'INPUT_PARSE',
      message: expect.stringContaining('line 3: unexpected "x" after the closing quote'),
    });
  });

  it('reports a quote that is never closed at the line it opens', async () => {
    const items = await read('open.csv', 'a,b\n1,2\n3,"oops\n5,6\n7,8\n');
    expect(items).toHaveLength(2);
    expect(items[1]).toMatchObject({ kind: 'problem', row: 2, line: 3, code: 'INPUT_PARSE' });
    expect(items[1]?.kind === 'problem' && items[1].message).toMatch(/never closed.*line 6/);
  });

  it('reports an oversized row as INPUT_TOO_LARGE without keeping it, and reads the next rows', async () => {
    const big = 'x'.repeat(5000);
    const items = await read('big.csv', `a,b\n1,2\n3,"${big}\n${big}"\n5,6\n`, { maxRecordBytes: 1000 });
    expect(items.map((i) => [i.row, i.line, i.kind])).toEqual([
      [1, 2, 'record'],
      [2, 3, 'problem'],
      [3, 5, 'record'],
    ]);
    expect(items[1]).toMatchObject({ code: 'INPUT_TOO_LARGE', original: {} });
  });

  it('counts multi-byte characters as bytes for the size limit', async () => {
    const items = await read('utf8big.csv', `a\n${'é'.repeat(60)}\nok\n`, { maxRecordBytes: 100 });
    expect(items.map((i) => i.kind)).toEqual(['problem', 'record']);
  });

  it('rejects duplicate and empty header names as a fatal error', async () => {
    const dup = await iterationError(openSource(await files.write('dup.csv', 'id,Amount,name,Amount\n1,2,3,4\n')));
    expect(isCrmSyncError(dup, 'INPUT_PARSE')).toBe(true);
    expect((dup as Error).message).toContain('column 4 repeats the name "Amount" of column 2');
    const empty = await iterationError(openSource(await files.write('empty.csv', 'id,,name\n1,2,3\n')));
    expect((empty as Error).message).toContain('column 2 has no name');
  });

  it('rejects a header wider than maxColumns', async () => {
    const err = await iterationError(openSource(await files.write('wide.csv', 'a,b,c\n1,2,3\n'), { maxColumns: 2 }));
    expect(isCrmSyncError(err, 'INPUT_TOO_LARGE')).toBe(true);
  });

  it('gives the same row numbers on every read', async () => {
    const reader = openSource(await files.write('again.csv', 'a,b\n1,2\n3\n\n4,5\n'));
    const first = plain(await collect(reader));
    const second = plain(await collect(reader));
    expect(second).toEqual(first);
    expect(first.map((i) => i.row)).toEqual([1, 2, 3]);
  });

  it('treats a column named __proto__ as an ordinary column', async () => {
    const reader = openSource(await files.write('proto.csv', '__proto__,name\nx,A\n'));
    const [item] = await collect(reader);
    expect(item?.kind === 'record' && Object.hasOwn(item.values, '__proto__')).toBe(true);
    expect(item?.kind === 'record' && item.values['__proto__']).toBe('x');
    expect(Object.getPrototypeOf(item?.kind === 'record' ? item.values : null)).toBe(Object.prototype);
  });

  it('refuses an empty file (nothing but a BOM and white space) as INPUT_EMPTY', async () => {
    for (const text of ['', '\ufeff', ' \r\n\n']) {
      const err = await read('nothing.csv', text).catch((e: unknown) => e);
      expect(isCrmSyncError(err, 'INPUT_EMPTY'), JSON.stringify(text)).toBe(true);
      expect((err as Error).message).toContain('the file is empty');
    }
  });
});
