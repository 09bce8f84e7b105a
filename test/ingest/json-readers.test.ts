import { describe, expect, it } from 'vitest';
import { isCrmSyncError } from '../../src/errors/index.js';
import { openSource, RAW_TEXT_KEY, type SourceItem } from '../../src/ingest/index.js';
import { collect, fixtureDir, iterationError, plain } from './fixtures.js';

const files = fixtureDir();

async function read(name: string, content: string, options = {}): Promise<SourceItem[]> {
  return plain(await collect(openSource(await files.write(name, content), options)));
}

describe('NDJSON reader', () => {
  it('reads one object per line, skips blank lines without counting them, and reports a bad line', async () => {
    const text = [
      '{"id":"1","name":"A"}',
      '',
      '{"id":"2","name":',
      '   ',
      '{"id":"3","tags":["a","b"],"n":null}',
      '[1,2]',
      '{"id":"4"}',
    ].join('\r\n');
    const reader = openSource(await files.write('rows.ndjson', text));
    const items = plain(await collect(reader));
    expect(items.map((i) => [i.row, i.line, i.kind])).toEqual([
      [1, 1, 'record'],
      [2, 3, 'problem'],
      [3, 5, 'record'],
      [4, 6, 'problem'],
      [5, 7, 'record'],
    ]);
    expect(items[1]).toMatchObject({
      code: 'INPUT_PARSE',
      message: expect.stringMatching(/^line 3: not valid JSON/),
      original: { [RAW_TEXT_KEY]: '{"id":"2","name":' },
    });
    expect(items[2]).toMatchObject({
      values: { id: '3', tags: ['a', 'b'], n: null },
      original: { id: '3', tags: '["a","b"]', n: '' },
    });
    expect(items[3]).toMatchObject({ message: 'line 6: expected a JSON object (one row), found an array' });
    expect(reader.columns).toEqual(['id', 'name', 'tags', 'n']);
  });

  it('is chosen for .jsonl too, and reports an oversized line without losing the next', async () => {
    const items = await read('big.jsonl', `{"a":"${'x'.repeat(3000)}"}\n{"a":"ok"}\n`, { maxRecordBytes: 1000 });
    expect(items.map((i) => [i.row, i.line, i.kind])).toEqual([
      [1, 1, 'problem'],
      [2, 2, 'record'],
    ]);
    expect(items[0]).toMatchObject({ code: 'INPUT_TOO_LARGE' });
  });
});

describe('JSON array reader', () => {
  it('streams elements that span lines with the line each starts on', async () => {
    const text =
      '[\n  {\n    "id": "1",\n    "name": "A"\n  },\n  {"id": "2", "note": "has ] and } and \\" inside"},\n\n  {"id": 3,\n "nested": {"x": [1, {"y": 2}]}}\n]\n';
    const reader = openSource(await files.write('rows.json', text));
    const items = plain(await collect(reader));
    expect(items.map((i) => [i.row, i.line, i.kind])).toEqual([
      [1, 2, 'record'],
      [2, 6, 'record'],
      [3, 8, 'record'],
    ]);
    expect(items[1]).toMatchObject({ values: { note: 'has ] and } and " inside' } });
    expect(items[2]).toMatchObject({
      values: { id: 3, nested: { x: [1, { y: 2 }] } },
      original: { id: '3', nested: '{"x":[1,{"y":2}]}' },
    });
    expect(reader.columns).toEqual(['id', 'name', 'note', 'nested']);
  });

  it('reports a non-object element and an unparseable element as row problems and goes on', async () => {
    const items = await read('mixed.json', '[{"id":"1"},\n42,\n"text",\n{"id": tru},\n{"id":"5"}]');
    expect(items.map((i) => [i.row, i.line, i.kind])).toEqual([
      [1, 1, 'record'],
      [2, 2, 'problem'],
      [3, 3, 'problem'],
      [4, 4, 'problem'],
      [5, 5, 'record'],
    ]);
    expect(items[1]).toMatchObject({
      code: 'INPUT_PARSE',
      message: 'element 2 (line 2): expected a JSON object (one row), found a number',
    });
    expect(items[2]).toMatchObject({ message: 'element 3 (line 3): expected a JSON object (one row), found a string' });
    expect(items[3]).toMatchObject({
      message: expect.stringMatching(/^element 4 \(line 4\): not valid JSON/),
      original: { [RAW_TEXT_KEY]: '{"id": tru}' },
    });
  });

  it('reports a truncated document once, at the line where it breaks, and stops', async () => {
    const items = await read('cut.json', '[\n{"id":"1"},\n{"id":"2",\n "name": "B');
    expect(items).toHaveLength(2);
    expect(items[1]).toMatchObject({ kind: 'problem', row: 2, line: 4, code: 'INPUT_PARSE' });
    expect(items[1]?.kind === 'problem' && items[1].message).toMatch(
      /ends in the middle of the row that starts on line 3.*cannot be read/,
    );
  });

  it('reports broken structure between elements and reads nothing after it', async () => {
    const items = await read('broken.json', '[{"id":"1"}\n{"id":"2"}, {"id":"3"}]');
    expect(items.map((i) => i.kind)).toEqual(['record', 'problem']);
    expect(items[1]).toMatchObject({ line: 2, message: expect.stringContaining(`expected ',' or ']', found "{"`) });
  });

  it('reports an array that is never closed', async () => {
    const items = await read('open.json', '[{"id":"1"},\n{"id":"2"}\n');
    expect(items.map((i) => i.kind)).toEqual(['record', 'record', 'problem']);
    expect(items[2]).toMatchObject({ message: expect.stringContaining('ends before the array is closed') });
  });

  it('rejects a document that is not an array as fatal', async () => {
    const err = await iterationError(openSource(await files.write('object.json', '\n{"deals": []}')));
    expect(isCrmSyncError(err, 'INPUT_PARSE')).toBe(true);
    expect((err as Error).message).toContain('line 2: expected a JSON array of objects');
  });

  it('reports an oversized element and continues with the next', async () => {
    const items = await read('big.json', `[{"a":"${'x'.repeat(5000)}"},\n{"a":"ok"}]`, { maxRecordBytes: 1000 });
    expect(items.map((i) => [i.kind, i.line])).toEqual([
      ['problem', 1],
      ['record', 2],
    ]);
    expect(items[0]).toMatchObject({ code: 'INPUT_TOO_LARGE' });
  });

  it('caps the number of distinct keys at maxColumns', async () => {
    const items = await read('keys.json', '[{"a":1,"b":2},{"a":1,"c":3},{"b":1}]', { maxColumns: 2 });
    expect(items.map((i) => i.kind)).toEqual(['record', 'problem', 'record']);
    expect(items[1]).toMatchObject({ code: 'INPUT_TOO_LARGE' });
  });

  it('reads an empty array as no rows', async () => {
    expect(await read('none.json', ' [ ] ')).toEqual([]);
  });
});
