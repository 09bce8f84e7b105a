import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeError, type RowResult } from '../../src/runs/index.js';
import { csv, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';

/**
 * Every example of issue 11 ("nothing dropped silently") through the real CLI, real Redis and
 * the simulator over HTTP: each ends as a clear error (exit 2, nothing sent) or as an invalid
 * row with line, field and reason.
 */
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ records: 20 });
});
afterAll(async () => h?.close());

const cli = cliFor(() => h);
/** Requests the CRM received that were not list pages: writes, applied or refused. */
const writes = () => h.ws.stats.requests - h.ws.stats.listPages;
const contacts = () => [...h.ws.contacts.values()];
const deals = () => [...h.ws.deals.values()];

async function results(runId: string): Promise<RowResult[]> {
  const out: RowResult[] = [];
  for await (const r of h.runtime.store.iterateResults(runId)) out.push(r);
  return out;
}

function runIdOf(stdout: string): string {
  const id = /Run (\S+):/.exec(stdout)?.[1];
  if (id === undefined) throw new Error(`no run id in: ${stdout}`);
  return id;
}

describe('unknown columns and keys are refused before anything is sent', () => {
  it('an NDJSON row with "phone" and "emial" stops the file with a did-you-mean; a CSV with the same headers fails --dry-run too', async () => {
    const c = contacts()[0]!;
    const before = writes();
    const ndjson = h.file(
      'typos.ndjson',
      `${JSON.stringify({ id: c.id, name: 'Rafael Ibrahim', phone: '+49 30 1234', emial: 'x@y.example' })}\n`,
    );
    const imported = await cli(['import', ndjson, '--op', 'contact.update', '-w', 'acme', '--work']);
    expect(imported.code).toBe(2);
    expect(imported.stderr).toContain('INPUT_COLUMNS');
    expect(imported.stderr).toContain('"phone" (did you mean "phone_number"?)');
    expect(imported.stderr).toContain('"emial" (did you mean "email"?)');
    expect(imported.stderr).toContain('--ignore-unknown-columns');
    const table = h.file(
      'typos.csv',
      csv(['id', 'name', 'phone', 'emial'], [[c.id, 'Rafael Ibrahim', '+49 30 1234', 'x@y.example']]),
    );
    const dry = await cli(['import', table, '--op', 'contact.update', '-w', 'acme', '--dry-run']);
    expect(dry.code).toBe(2);
    expect(dry.stderr).toContain('"phone" (did you mean "phone_number"?)');
    expect(writes()).toBe(before);
    expect(h.ws.contacts.get(c.id)!.name).toBe(c.name);
  }, 60_000);

  it('--ignore-unknown-columns skips them on purpose and says which', async () => {
    const c = contacts()[1]!;
    const table = h.file('ignored.csv', csv(['id', 'name', 'Notes'], [[c.id, 'Kept Name', 'internal']]));
    const done = await cli([
      'import',
      table,
      '--op',
      'contact.update',
      '-w',
      'acme',
      '--work',
      '--ignore-unknown-columns',
    ]);
    expect(done.stderr).toContain('ignored columns (not sent): "Notes"');
    expect(done.code).toBe(0);
    const shown = await cli(['runs', 'show', runIdOf(done.stdout)]);
    expect(shown.stdout).toContain('  ignored columns (not sent): "Notes"');
    expect(h.ws.contacts.get(c.id)!.name).toBe('Kept Name');
  }, 60_000);

  it('a mapped column missing from the header names the nearest header, before a run exists', async () => {
    const mapping = h.file('deal-mapping.json', JSON.stringify({ columns: { 'Deal Id': 'id', 'Deal name': 'name' } }));
    const table = h.file('deal-ids.csv', csv(['Deal ID', 'Deal name'], [[deals()[0]!.id, 'X']]));
    const runsBefore = (await h.runtime.store.listRuns({ limit: 1000 })).runs.length;
    const out = await cli(['import', table, '--op', 'deal.update', '-w', 'acme', '--mapping', mapping, '--dry-run']);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain(
      'the mapping names column "Deal Id", which the file does not have (did you mean "Deal ID"?)',
    );
    expect((await h.runtime.store.listRuns({ limit: 1000 })).runs.length).toBe(runsBefore);
  }, 60_000);

  it('a mapping file naming only the odd column: id and name map themselves beside it', async () => {
    const c = contacts()[3]!;
    const mapping = h.file('phone-mapping.json', JSON.stringify({ columns: { Phone: 'phone_number' } }));
    const table = h.file('odd-column.csv', csv(['id', 'name', 'Phone'], [[c.id, 'Odd Column', '+49 30 555']]));
    const done = await cli(['import', table, '--op', 'contact.update', '-w', 'acme', '--mapping', mapping, '--work']);
    expect(done.stderr).not.toContain('did you mean');
    expect(done.code).toBe(0);
    expect(h.ws.contacts.get(c.id)).toMatchObject({ name: 'Odd Column', phone_number: '+49 30 555' });
  }, 60_000);

  it('reconcile refuses the same unknown column as import, before paging the CRM, and labels a bad cell the same way', async () => {
    const d = deals()[2]!;
    const mapping = h.file(
      'status-mapping.json',
      JSON.stringify({ columns: { 'Deal ID': 'id', 'Deal name': 'name', 'Deal status': 'status' } }),
    );
    const extra = h.file('extra.csv', csv(['Deal ID', 'Deal name', 'Deal status', 'Owner'], [[d.id, 'N', 'won', 'x']]));
    const pagesBefore = h.ws.stats.listPages;
    const planned = await cli(['reconcile', extra, '--op', 'deal.update', '-w', 'acme', '--mapping', mapping]);
    expect(planned.code).toBe(2);
    expect(planned.stderr).toContain('column(s) "Owner"');
    expect(h.ws.stats.listPages).toBe(pagesBefore);
    const bad = h.file('bad-status.csv', csv(['Deal ID', 'Deal name', 'Deal status'], [[d.id, 'N', 'done']]));
    const plan = await cli(['reconcile', bad, '--op', 'deal.update', '-w', 'acme', '--mapping', mapping, '--out', '-']);
    expect(plan.stdout).toContain('Deal status (status): must be one of in_progress, won, lost');
    const dry = await cli(['import', bad, '--op', 'deal.update', '-w', 'acme', '--mapping', mapping, '--dry-run']);
    expect(dry.stdout).toContain('Deal status (status): must be one of in_progress, won, lost');
  }, 60_000);
});

describe('values are what they claim to be', () => {
  it('NUL cells, JSON numbers for text, "." and ".." ids end invalid with line, field and reason; nothing reaches the CRM', async () => {
    const [c0, c1, c2] = contacts();
    const before = writes();
    const lines = [
      { id: c0!.id, name: 'Nul\u0000Name' },
      { id: c1!.id, name: 42 },
      { id: 7, name: 'Seven' },
      { id: '.', name: 'Dot' },
      { id: '..', name: 'Dots' },
      { id: c2!.id, name: 'Tab\tand\nnewline are text' },
    ];
    const file = h.file('values.ndjson', lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const out = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--work']);
    expect(out.code).toBe(1);
    const byRow = new Map((await results(runIdOf(out.stdout))).map((r) => [r.row, r]));
    expect(byRow.get(1)).toMatchObject({
      status: 'invalid',
      line: 1,
      errors: [{ field: 'name', message: 'contains the control character U+0000 at position 4' }],
    });
    expect(byRow.get(2)).toMatchObject({
      status: 'invalid',
      line: 2,
      errors: [{ field: 'name', message: expect.stringMatching(/^must be text, not a number \(42\)/) }],
    });
    expect(byRow.get(3)).toMatchObject({
      status: 'invalid',
      line: 3,
      errors: [{ field: 'id', message: expect.stringMatching(/^must be text, not a number \(7\)/) }],
    });
    expect(byRow.get(4)).toMatchObject({
      status: 'invalid',
      line: 4,
      errors: [{ field: 'id', message: 'must not be "." or ".."' }],
    });
    expect(byRow.get(5)).toMatchObject({
      status: 'invalid',
      line: 5,
      errors: [{ field: 'id', message: 'must not be "." or ".."' }],
    });
    expect(byRow.get(6)).toMatchObject({ status: 'succeeded' });
    expect(writes()).toBe(before + 1);
    expect(h.ws.contacts.get(c2!.id)!.name).toBe('Tab\tand\nnewline are text');
  }, 60_000);

  it('JSON-array rows are numbered by element, also when the array is on one line', async () => {
    const c = contacts()[3]!;
    const file = h.file(
      'one-line.json',
      JSON.stringify([
        { id: c.id, name: 'A' },
        { id: c.id, name: 5 },
        { id: '..', name: 'B' },
      ]),
    );
    const out = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--dry-run']);
    const shown = out.stdout;
    expect(shown).toContain('row 2 (element 2, line 1): invalid: name: must be text');
    expect(shown).toContain('row 3 (element 3, line 1): invalid: id: must not be "." or ".."');
  }, 60_000);

  it('emails as the spec means them: the client refuses x@bad-.example, and so does the simulator on its own', async () => {
    const c = contacts()[4]!;
    const file = h.file(
      'emails.csv',
      csv(
        ['id', 'email'],
        [
          [c.id, 'x@bad-.example'],
          [c.id, `x@${'a'.repeat(64)}.example`],
        ],
      ),
    );
    const before = writes();
    const out = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--dry-run']);
    expect(out.stdout).toContain(
      'row 1 (line 2, spreadsheet row 2): invalid: email: is not a valid email address: it has a domain part "bad-"',
    );
    expect(out.stdout).toContain(
      'row 2 (line 3, spreadsheet row 3): invalid: email: is not a valid email address: it has a domain part longer than 63 characters',
    );
    expect(writes()).toBe(before);
  }, 60_000);
});

describe('clear words for edge files', () => {
  it('empty file, header only, a ;-separated file, a workbook, a directory', async () => {
    const before = writes();
    const c = contacts()[5]!;
    const dir = join(h.dir, 'a-directory');
    mkdirSync(dir);
    const dryRun = (file: string, ...more: string[]) =>
      cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--dry-run', ...more]);
    // Seven imports of seven files, none reading another's: run at once, they cost one CLI start
    // of wall time instead of seven (only the ;-separated one writes, and only its own contact).
    const [empty, headerOnly, semi, forced, workbook, pdf, directory] = await Promise.all([
      dryRun(h.file('empty.csv', '')),
      dryRun(h.file('header.csv', 'id,name\n')),
      cli([
        'import',
        h.file('semi.csv', `id;name\n${c.id};Semi Colon\n`),
        '--op',
        'contact.update',
        '-w',
        'acme',
        '--work',
      ]),
      dryRun(h.file('semi2.csv', `id;name\n${c.id};X\n`), '--delimiter', ','),
      dryRun(h.file('book.xlsx', 'PK\u0003\u0004 not really a workbook')),
      dryRun(h.file('doc.csv', '%PDF-1.7\n')),
      dryRun(dir),
    ]);

    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('the file is empty');

    expect(headerOnly.stdout).toContain('0 total (the file has 0 data rows)');
    expect(headerOnly.code).toBe(0);

    expect(semi.stderr).toContain('delimiter: ";" (guessed from the header line');
    expect(semi.code).toBe(0);
    expect(h.ws.contacts.get(c.id)!.name).toBe('Semi Colon');
    expect(forced.code).toBe(2);
    expect(forced.stderr).toContain('the header looks ;-separated: pass --delimiter ";"');

    expect(workbook.code).toBe(2);
    expect(workbook.stderr).toContain('this is an Excel workbook (.xlsx) or another zip file: save it as CSV UTF-8');
    expect(pdf.stderr).toContain('this is a PDF document');

    expect(directory.code).toBe(2);
    expect(directory.stderr).toContain('is a directory');
    expect(writes()).toBe(before + 1);
  }, 90_000);

  it('an update file without an id column is refused once for the file, pointing at --reconcile --match; that then works', async () => {
    const c = contacts()[8]!;
    const before = writes();
    const file = h.file('no-ids.csv', csv(['name', 'email'], [['By Key', c.email]]));
    const plain = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--work']);
    expect(plain.code).toBe(2);
    expect(plain.stderr).toContain('the file has no "id" column, so no row can be sent');
    expect(plain.stderr).toContain('--reconcile --match email');
    expect(plain.stderr).not.toContain('is required');
    expect(writes()).toBe(before);
    const keyed = await cli([
      'import',
      file,
      '--op',
      'contact.update',
      '-w',
      'acme',
      '--work',
      '--reconcile',
      '--match',
      'email',
    ]);
    expect(keyed.code).toBe(0);
    expect(h.ws.contacts.get(c.id)!.name).toBe('By Key');
  }, 60_000);

  it('reconcile names the key column it looked for and what it found', async () => {
    const file = h.file('keyed.csv', csv(['Email', 'name'], [[contacts()[6]!.email, 'K']]));
    const out = await cli(['reconcile', file, '--op', 'contact.update', '-w', 'acme', '--ignore-unknown-columns']);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain(
      'reconcile matches contacts by email, read from column "email", which the file does not have (did you mean "Email"?) (its columns: "Email", "name")',
    );
  }, 60_000);

  it('no id column and unknown columns: the id advice and every did-you-mean in one message, one exit (issue 46, item 6)', async () => {
    const before = writes();
    const runsBefore = (await h.runtime.store.listRuns({ limit: 1000 })).runs.length;
    const file = h.file(
      'contact-id.csv',
      csv(['Contact ID', 'E-mail', 'Phone'], [[contacts()[8]!.id, contacts()[8]!.email, '+1 200-555-0146']]),
    );
    const out = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--dry-run']);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain('INPUT_COLUMNS');
    expect(out.stderr).toContain('the file has no "id" column, so no row can be sent');
    expect(out.stderr).toContain('Add an id column, or match rows by a key column with --reconcile --match');
    expect(out.stderr).toContain('"Contact ID" (did you mean "id"?)');
    expect(out.stderr).toContain('"E-mail" (did you mean "email"?)');
    expect(out.stderr).toContain('"Phone" (did you mean "phone_number"?)');
    // One refusal: the advice first, then the columns, and "Nothing was sent." once at the end.
    expect(out.stderr.indexOf('Add an id column')).toBeLessThan(out.stderr.indexOf('"Contact ID" (did you mean'));
    expect(out.stderr.match(/Nothing was sent\./g)).toHaveLength(1);
    expect(writes()).toBe(before);
    expect((await h.runtime.store.listRuns({ limit: 1000 })).runs.length).toBe(runsBefore);

    // reconcile / plan: the key column it looked for, and the same did-you-means, at once.
    const planned = await cli(['reconcile', file, '--op', 'contact.update', '-w', 'acme']);
    expect(planned.code).toBe(2);
    expect(planned.stderr).toContain('read from column "email", which the file does not have (did you mean "E-mail"?)');
    expect(planned.stderr).toContain('"Phone" (did you mean "phone_number"?)');
    expect(planned.stderr.match(/Nothing was sent\./g)).toHaveLength(1);
  }, 60_000);

  it('a dry run prints its first invalid rows and is labelled as one, "would be sent" rather than skipped', async () => {
    const c = contacts()[7]!;
    const file = h.file(
      'dry.csv',
      csv(
        ['id', 'name', 'email'],
        [
          [c.id, 'Fine', ''],
          [c.id, '', 'nope'],
        ],
      ),
    );
    const out = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--dry-run']);
    expect(out.stdout).toMatch(/^DRY RUN \(nothing was sent\) Run /);
    expect(out.stdout).toContain('1 would be sent');
    expect(out.stdout).toContain(
      'first problem rows:\n  row 2 (line 3, spreadsheet row 3): invalid: email: is not a valid email address: it has no "@"',
    );
    const shown = await cli(['runs', 'show', runIdOf(out.stdout)]);
    expect(shown.stdout).toMatch(/^DRY RUN \(nothing was sent\)/);
  }, 60_000);
});

describe('one decoder for every path', () => {
  it('one file gives identical row outcomes through import --dry-run, reconcile and runs retry --file', async () => {
    const [c0, c1, c2, c3] = contacts().slice(10);
    const rows: Array<Array<string | number>> = [
      [c0!.id, 'One Decoder', '', ''],
      [c1!.id, 'Nul\u0000Name', '', ''],
      [c2!.id, 'X', 'x@bad-.example', ''],
      ['..', 'Y', '', ''],
      [c3!.id, '', '', '+1 555 0100'],
      [c3!.id.replace(/^./, '\u0001'), 'Ctl', '', ''],
    ];
    const file = h.file('same.csv', csv(['id', 'name', 'email', 'phone_number'], rows));
    const problemRows = [2, 3, 4, 6];

    const dry = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--dry-run']);
    const dryResults = await results(runIdOf(dry.stdout));
    const viaImport = new Map(dryResults.filter((r) => r.status === 'invalid').map((r) => [r.row, describeError(r)]));
    expect([...viaImport.keys()]).toEqual(problemRows);

    const plan = await cli(['reconcile', file, '--op', 'contact.update', '-w', 'acme', '--out', '-']);
    const planRows = parse(plan.stdout, { columns: true }) as Array<{ row: string; action: string; message: string }>;
    const viaReconcile = new Map(planRows.filter((r) => r.action === 'invalid').map((r) => [Number(r.row), r.message]));
    expect(viaReconcile).toEqual(viaImport);

    const real = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--work']);
    const runId = runIdOf(real.stdout);
    const exportPath = join(h.dir, 'same-failed.csv');
    expect((await cli(['runs', 'export', runId, '--failed', '--out', exportPath])).code).toBe(0);
    const retried = await cli(['runs', 'retry', runId, '--file', exportPath, '--work']);
    expect(retried.code).toBe(1);
    const viaRetry = new Map(
      (await results(runId)).filter((r) => r.status === 'invalid').map((r) => [r.row, describeError(r)]),
    );
    expect(viaRetry).toEqual(viaImport);
  }, 120_000);
});
