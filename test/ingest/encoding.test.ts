import { chmod } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { CrmSyncError, isCrmSyncError } from '../../src/errors/index.js';
import { openSource } from '../../src/ingest/index.js';
import { collect, fixtureDir, iterationError } from './fixtures.js';

const files = fixtureDir();

describe('encodings and unreadable files', () => {
  it('rejects UTF-16 with the advice to save as UTF-8', async () => {
    const text = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('id,name\n1,A\n', 'utf16le')]);
    const err = await iterationError(openSource(await files.write('utf16.csv', text)));
    expect(isCrmSyncError(err, 'INPUT_ENCODING')).toBe(true);
    expect((err as Error).message).toContain('the file is UTF-16; save it as UTF-8 (CSV UTF-8 in Excel)');
  });

  it('recognises UTF-16 without a BOM by its NUL bytes', async () => {
    const err = await iterationError(
      openSource(await files.write('nobom16.csv', Buffer.from('id,name\n1,A\n', 'utf16le'))),
    );
    expect(isCrmSyncError(err, 'INPUT_ENCODING')).toBe(true);
  });

  it('names the line of an invalid UTF-8 byte', async () => {
    // 0xE9 is "é" in Windows-1252: the usual way a non-UTF-8 export shows up.
    const text = Buffer.concat([Buffer.from('id,name\n1,ok\n2,Ren'), Buffer.from([0xe9]), Buffer.from('\n3,ok\n')]);
    const err = await iterationError(openSource(await files.write('latin1.csv', text)));
    expect(isCrmSyncError(err, 'INPUT_ENCODING')).toBe(true);
    expect((err as Error).message).toContain('line 3 is not valid UTF-8');
  });

  it('finds the line of a bad byte deep in a large file, past chunk boundaries', async () => {
    const head = 'id,name\n' + 'x,'.padEnd(99, 'é') + '\n';
    const body = head.repeat(2000); // ~400 KB of valid multi-byte text spanning many chunks
    const text = Buffer.concat([Buffer.from(body), Buffer.from([0xc3, 0x28]), Buffer.from('\n')]);
    const err = await iterationError(openSource(await files.write('deep.csv', text), { maxColumns: 5000 }));
    expect((err as Error).message).toContain(`line ${2000 * 2 + 1} is not valid UTF-8`);
  });

  it('reports a file cut inside a multi-byte character', async () => {
    const text = Buffer.concat([Buffer.from('id\n1\n'), Buffer.from([0xe2, 0x82])]);
    const err = await iterationError(openSource(await files.write('cut.csv', text)));
    expect(isCrmSyncError(err, 'INPUT_ENCODING')).toBe(true);
    expect((err as Error).message).toContain('line 3');
  });

  it('rejects a missing file and a directory as INPUT_UNREADABLE', async () => {
    const missing = await iterationError(openSource(files.path('missing.csv')));
    expect(isCrmSyncError(missing, 'INPUT_UNREADABLE')).toBe(true);
    expect((missing as Error).message).toContain('does not exist');
    await files.write('placeholder.txt', '');
    const dir = (() => {
      try {
        return openSource(files.path(''), { format: 'csv' });
      } catch (e) {
        return e;
      }
    })();
    expect(isCrmSyncError(dir, 'INPUT_UNREADABLE')).toBe(true);
    expect((dir as Error).message).toContain('directory');
  });

  it.skipIf(process.getuid?.() === 0)('rejects a file without read permission as INPUT_UNREADABLE', async () => {
    const path = await files.write('secret.csv', 'a\n1\n');
    await chmod(path, 0o000);
    const err = await iterationError(openSource(path));
    expect(isCrmSyncError(err, 'INPUT_UNREADABLE')).toBe(true);
    expect((err as Error).message).toContain('permission denied');
  });

  it('asks for --format when the extension says nothing', () => {
    expect(() => openSource('/tmp/data.txt')).toThrow(CrmSyncError);
    expect(() => openSource('/tmp/data.txt')).toThrow(/--format/);
    expect(() => openSource('/tmp/data.csv', { delimiter: '"' })).toThrow(/delimiter/);
  });

  it('reads a file of another extension when --format is given', async () => {
    const rows = await collect(openSource(await files.write('export.txt', 'a\n1\n'), { format: 'csv' }));
    expect(rows).toHaveLength(1);
  });
});
