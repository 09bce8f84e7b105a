import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isCrmSyncError } from '../../src/errors/index.js';
import { loadDefinitions, resolveSource } from '../../src/schedule/index.js';

const dir = mkdtempSync(join(tmpdir(), 'crm-sync-defs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const valid = {
  name: 'nightly-contacts',
  workspace: 'acme',
  operation: 'contact.update',
  source: 'data/contacts-*.csv',
  matchKey: 'email',
  schedule: { cron: '0 2 * * *', timezone: 'Europe/Berlin' },
};

function jobsDir(files: Record<string, unknown>): string {
  const d = mkdtempSync(join(dir, 'jobs-'));
  for (const [name, content] of Object.entries(files))
    writeFileSync(join(d, name), typeof content === 'string' ? content : JSON.stringify(content));
  return d;
}

function loadError(d: string): string {
  try {
    loadDefinitions(d);
  } catch (err) {
    expect(isCrmSyncError(err, 'SYNC_DEFINITION_INVALID')).toBe(true);
    return (err as Error).message;
  }
  throw new Error('expected the definitions to be rejected');
}

describe('sync definitions in jobs/', () => {
  it('loads valid definitions with defaults', () => {
    const [def] = loadDefinitions(jobsDir({ 'a.json': valid }));
    expect(def).toMatchObject({
      name: 'nightly-contacts',
      operation: 'contact.update',
      options: { dryRun: false },
      schedule: { timezone: 'Europe/Berlin' },
    });
  });

  it('names the file and the field of an invalid definition', () => {
    const d = jobsDir({
      'ok.json': valid,
      'broken.json': { ...valid, name: 'other', schedule: { cron: 'every night' } },
    });
    expect(loadError(d)).toMatch(/broken\.json: schedule\.cron: must be a cron pattern/);
    expect(loadError(jobsDir({ 'op.json': { ...valid, operation: 'deal.delete' } }))).toMatch(
      /op\.json: operation: must be one of deal\.update, lead\.update, contact\.update, deal\.upsert/,
    );
    expect(
      loadError(jobsDir({ 'tz.json': { ...valid, schedule: { cron: '0 2 * * *', timezone: 'Mars/Olympus' } } })),
    ).toMatch(/tz\.json: schedule\.timezone: is not a known IANA time zone/);
    expect(loadError(jobsDir({ 'url.json': { ...valid, options: { notifyUrl: 'ftp://x' } } }))).toMatch(
      /url\.json: options\.notifyUrl: must be an http\(s\) URL/,
    );
    expect(loadError(jobsDir({ 'extra.json': { ...valid, colour: 'red' } }))).toMatch(
      /extra\.json: unknown field\(s\) colour/,
    );
    expect(loadError(jobsDir({ 'json.json': '{ nope' }))).toMatch(/json\.json: not valid JSON/);
    expect(loadError(jobsDir({ 'a.json': valid, 'b.json': valid }))).toMatch(
      /b\.json: name: "nightly-contacts" is already used by .*a\.json/,
    );
  });

  it('resolves a glob source to the newest matching file, relative to the definition', () => {
    const d = jobsDir({ 'a.json': valid });
    mkdirSync(join(d, 'data'));
    const older = join(d, 'data', 'contacts-2024-01-02.csv');
    const newer = join(d, 'data', 'contacts-2024-01-01.csv');
    writeFileSync(older, 'x');
    writeFileSync(newer, 'x');
    writeFileSync(join(d, 'data', 'deals-2030.csv'), 'x');
    utimesSync(older, new Date(2024, 0, 1), new Date(2024, 0, 1));
    utimesSync(newer, new Date(2024, 0, 5), new Date(2024, 0, 5));
    const [def] = loadDefinitions(d);
    expect(resolveSource(def!)).toBe(newer);
  });
});
