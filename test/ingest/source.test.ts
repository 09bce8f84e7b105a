import { existsSync, utimesSync } from 'node:fs';
import { appendFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/index.js';
import {
  asSource,
  openFileSource,
  openPostgresSource,
  openSourceSpec,
  openStdinSource,
  recordedKeyColumn,
  reopenSource,
  resolveSpecFile,
  resumeRefusal,
  sourceChange,
  sourceSpecText,
  STDIN_SPOOL_DIR,
  type Source,
} from '../../src/ingest/index.js';
import { collect, fixtureDir } from './fixtures.js';

const files = fixtureDir();
const quote = (word: string) => `<${word}>`;

/** What every caller reads of a Source, as plain data: the contract, whatever the kind. */
function described(source: Source) {
  return {
    label: source.label,
    noun: source.noun,
    keyColumn: source.keyColumn,
    resumable: source.resumable,
    command: source.commandWords(quote),
  };
}

describe('Source: a file', () => {
  it('is named by its path, resumable, and records the format, the sniffed delimiter and its size and mtime', async () => {
    const path = await files.write('people.csv', 'email;name\na@example.com;Ann\nb@example.com;Bob\n');
    const source = openFileSource(path);
    expect(described(source)).toEqual({
      label: path,
      noun: 'file',
      keyColumn: undefined,
      resumable: true,
      command: `<${path}>`,
    });
    const rows = await collect(source.reader);
    expect(rows.map((r) => r.original.email)).toEqual(['a@example.com', 'b@example.com']);
    const facts = source.facts();
    expect(facts).toMatchObject({ format: 'csv', delimiter: ';', sourceSize: 47 });
    expect(typeof facts.sourceMtimeMs).toBe('number');
    expect(await source.close({ used: false })).toBeUndefined();
    expect(existsSync(path)).toBe(true);
  });

  it('opens its reader on first use: a directory is refused there, not where it is named', async () => {
    const dir = dirname(await files.write('any.csv', 'a\n1\n'));
    const source = openFileSource(dir);
    expect(source.label).toBe(dir);
    expect(() => source.reader).toThrow(/directory/);
  });

  it('a path given as text becomes a file source read with the options given', async () => {
    const path = await files.write('rows.txt', '{"email":"c@example.com"}\n');
    const source = asSource(path, { format: 'ndjson' });
    expect(source.noun).toBe('file');
    expect((await collect(source.reader)).length).toBe(1);
    expect(source.facts().format).toBe('ndjson');
  });
});

describe('Source: stdin', () => {
  it('is a spooled copy, kept when a run used it and removed (with a note) when none did', async () => {
    const resultsDir = dirname(await files.write('marker', ''));
    const kept = await openStdinSource(Readable.from(['{"email":"a@example.com"}\n']), resultsDir, {
      format: 'ndjson',
    });
    expect(kept.label.startsWith(join(resultsDir, STDIN_SPOOL_DIR))).toBe(true);
    expect(described(kept)).toMatchObject({ noun: 'file', resumable: true });
    expect((await collect(kept.reader)).length).toBe(1);
    expect(await kept.close({ used: true })).toBeUndefined();
    expect(existsSync(kept.label)).toBe(true);

    const unused = await openStdinSource(Readable.from(['a,b\n1,2\n']), resultsDir, { format: 'csv' });
    expect(unused.facts()).toMatchObject({ format: 'csv', delimiter: ',' });
    expect(await unused.close({ used: false })).toBe(`no run read ${unused.label}: removed`);
    expect(existsSync(unused.label)).toBe(false);
  });
});

describe('Source: a PostgreSQL query', () => {
  const query = openPostgresSource({
    url: new Secret('postgres://reader:pw-hidden@127.0.0.1:5432/test'),
    urlSource: { env: 'WAREHOUSE_URL' },
    query: 'select ref, email\n  from contacts',
    keyColumn: 'ref',
  });

  it('is named by its label (never the URL), records the query, names rows by its key and is not resumable', async () => {
    expect(described(query)).toEqual({
      label: 'postgres ($WAREHOUSE_URL): select ref, email from contacts',
      noun: 'query',
      keyColumn: 'ref',
      resumable: false,
      command: '--from-postgres --query <the same query>',
    });
    expect(query.facts()).toEqual({
      query: { urlEnv: 'WAREHOUSE_URL', query: 'select ref, email\n  from contacts', keyColumn: 'ref' },
    });
    expect(JSON.stringify(query.facts())).not.toContain('pw-hidden');
    const source: Source = query;
    expect(source.reader).toBe(query);
    expect(await source.close({ used: false })).toBeUndefined();
  });
});

describe('a run read again from its record', () => {
  it('a query run is refused a resume; a file run is reopened with its recorded delimiter', async () => {
    const queryRun = { source: 'postgres ($X): select 1', options: { query: { urlEnv: 'X', query: 'select 1' } } };
    expect(resumeRefusal(queryRun)).toMatch(/database query/);
    expect(sourceChange(queryRun)).toBeUndefined();
    expect(recordedKeyColumn(queryRun)).toBeUndefined();
    expect(recordedKeyColumn({ options: { query: { query: 'q', keyColumn: 'ref' } } })).toBe('ref');

    const path = await files.write('semi.csv', 'email|name\na@example.com|Ann\n');
    const first = openFileSource(path, { delimiter: '|' });
    await collect(first.reader);
    const fileRun = { source: path, options: first.facts() };
    expect(resumeRefusal(fileRun)).toBeUndefined();
    expect(sourceChange(fileRun)).toBeUndefined();
    const again = reopenSource(fileRun);
    expect((await collect(again.reader)).map((r) => r.original.name)).toEqual(['Ann']);
  });

  it('a file that changed or went is named as the reason', async () => {
    const path = await files.write('moving.csv', 'email\na@example.com\n');
    const first = openFileSource(path);
    await collect(first.reader);
    const run = { source: path, options: first.facts() };
    await appendFile(path, 'b@example.com\n');
    expect(sourceChange(run)).toBe(`${path} changed since the run began; import the new file as a run of its own`);
    const gone = { source: join(dirname(path), 'gone.csv'), options: {} };
    expect(sourceChange(gone)).toBe(`its file ${gone.source} cannot be read any more`);
  });
});

describe('a sync definition names its source', () => {
  it('a glob opens the newest matching file; a query is described without its URL and is no file', async () => {
    const older = await files.write('export-1.csv', 'email\n');
    const newer = await files.write('export-2.csv', 'email\n');
    utimesSync(older, new Date(1_000_000), new Date(1_000_000));
    const dir = dirname(newer);
    const ctx = { syncName: 'nightly', file: 'nightly.json', resolvePath: (p: string) => join(dir, p) };
    expect(openSourceSpec('export-*.csv', ctx).label).toBe(newer);
    expect(sourceSpecText('export-*.csv')).toBe('export-*.csv');

    const spec = { postgres: { urlEnv: 'WAREHOUSE_URL', query: 'select *\n from deals' } };
    expect(sourceSpecText(spec)).toBe('postgres ($WAREHOUSE_URL): select * from deals');
    expect(() => resolveSpecFile(spec, ctx)).toThrow('sync nightly reads a database query, not a file');
    const opened = openSourceSpec(spec, ctx, { WAREHOUSE_URL: 'postgres://u:p@127.0.0.1:5432/test' });
    expect(opened.noun).toBe('query');
    expect(opened.facts()).toEqual({ query: { urlEnv: 'WAREHOUSE_URL', query: 'select *\n from deals' } });
  });
});
