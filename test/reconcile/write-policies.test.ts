import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMapping, readMappingFile } from '../../src/ingest/index.js';
import { silentLogger } from '../../src/log/index.js';
import { planReconcile } from '../../src/reconcile/index.js';
import { createCrmClient } from '../../src/runtime/index.js';
import type { SimContact } from '../../src/sim/index.js';
import { parse } from 'csv-parse/sync';
import { csv, resultsByRow, startHarness, type Harness } from '../helpers/pipeline.js';
import { cliFor } from '../helpers/run-cli.js';
import { reconcile, writes } from './fixtures.js';

async function collect(stream: PassThrough): Promise<string> {
  stream.end();
  let text = '';
  for await (const chunk of stream) text += String(chunk);
  return text;
}

/**
 * Field write policies (issue 33, item 4) where rows are compared with the CRM — the planner
 * (`reconcile --out`) and `import --reconcile` (reconcileImport) — and what they mean for a
 * plain import, against the simulator over HTTP with real workers.
 */
describe('field write policies', () => {
  let h: Harness;
  let contacts: SimContact[];
  const cli = cliFor(() => h);

  beforeAll(async () => {
    h = await startHarness({ records: 40, seed: 21 });
    await h.startWorkers();
    contacts = [...h.ws.contacts.values()];
  });
  afterAll(async () => h?.close());

  const tag = (i: number) => h.ws.tags[i]!.id;

  /** Puts contacts 0..n-1 in a known state: a phone (or none), one tag, their seeded names. */
  function seed(states: Array<{ phone: string; tags: string[] }>): SimContact[] {
    return states.map((s, i) => {
      const c = contacts[i]!;
      h.ws.updateRecord('contacts', c.id, { phone_number: s.phone, tag_ids: s.tags });
      return h.ws.contacts.get(c.id)!;
    });
  }

  const mappingFile = (name: string, columns: Record<string, unknown>) =>
    h.file(name, JSON.stringify({ columns: { Email: 'email', ...columns } }));

  it('never, if-empty and emptyCells clear hold back or clear exactly what they say; the plan shows what was held', async () => {
    const [a, b, c, d] = seed([
      { phone: '+1 200-555-0001', tags: [tag(0)] },
      { phone: '', tags: [tag(1)] },
      { phone: '+1 200-555-0003', tags: [] },
      { phone: '+1 200-555-0004', tags: [tag(2)] },
    ]) as [SimContact, SimContact, SimContact, SimContact];
    const mapping = mappingFile('policies-mapping.json', {
      Name: { field: 'name', write: 'never' },
      Phone: { field: 'phone_number', write: 'if-empty' },
      Tags: { field: 'tag_ids', type: 'list', emptyCells: 'clear' },
    });
    const file = h.file(
      'policies.csv',
      csv(
        ['Email', 'Name', 'Phone', 'Tags'],
        [
          // a: a new name (never: held), a new phone over one (if-empty: held), tags blank (clear: cleared)
          [a.email, 'Renamed A', '+1 300-555-0001', ''],
          // b: the CRM has no phone (if-empty: written); tags unchanged
          [b.email, b.name, '+1 300-555-0002', tag(1)],
          // c: equal everywhere, blank tags over none: nothing to clear
          [c.email, c.name, c.phone_number, ''],
          // d: only a new name, which never overwrites: unchanged, held
          [d.email, 'Renamed D', d.phone_number, tag(2)],
        ],
      ),
    );
    const parsed = readMappingFile(mapping);

    // The planner: what each row would do, with the held-back fields and why.
    const client = createCrmClient(h.config, 'acme', silentLogger);
    const out = new PassThrough();
    h.ws.resetStats();
    const plan = await planReconcile({
      file,
      op: 'contact.update',
      workspace: 'acme',
      client,
      matchKey: 'email',
      keyColumn: 'Email',
      mapping: parsed,
      out,
    }).finally(() => client.close());
    expect(writes(h)).toBe(0);
    expect(plan.counts).toMatchObject({ update: 2, skip: 2, invalid: 0 });
    expect(plan.summary).toMatchObject({
      changedRows: 2,
      clearedRows: 1,
      changed: { phone_number: 1, tag_ids: 1 },
      cleared: { tag_ids: 1 },
      held: { name: 2, phone_number: 1 },
    });
    const lines = parse(await collect(out), { columns: true }) as Array<Record<string, string>>;
    expect(lines.map((l) => l.action)).toEqual(['update', 'update', 'skip', 'skip']);
    expect(lines[0]!.changes).toBe(`tag_ids: ${tag(0)} -> `);
    expect(lines[0]!.held_back).toBe(
      `name: keeps ${a.name}, not Renamed A ("write": "never"); ` +
        `phone_number: keeps +1 200-555-0001, not +1 300-555-0001 ("write": "if-empty", and the CRM already has a value)`,
    );
    expect(lines[1]!.changes).toBe('phone_number:  -> +1 300-555-0002');
    expect(lines[1]!.held_back).toBe('');
    expect(lines[2]).toMatchObject({ message: 'unchanged', held_back: '' });
    expect(lines[3]!.message).toBe('unchanged: held back by the mapping\'s write policy: name ("write": "never")');

    // The same file through import --reconcile: the CRM ends exactly as planned.
    h.ws.resetStats();
    const run = await reconcile(h, file, {
      op: 'contact.update',
      matchKey: 'email',
      keyColumn: 'Email',
      mapping: parsed,
    });
    const done = await h.waitForRun(run.run.id);
    expect(done.counts).toMatchObject({ total: 4, succeeded: 2, skipped: 2, failed: 0 });
    expect(h.ws.stats.writes.contactUpdate).toBe(2);
    expect(h.ws.contacts.get(a.id)).toMatchObject({ name: a.name, phone_number: '+1 200-555-0001', tag_ids: [] });
    expect(h.ws.contacts.get(b.id)).toMatchObject({ name: b.name, phone_number: '+1 300-555-0002', tag_ids: [tag(1)] });
    expect(h.ws.contacts.get(c.id)).toMatchObject({ phone_number: c.phone_number, tag_ids: [] });
    expect(h.ws.contacts.get(d.id)).toMatchObject({ name: d.name });
    const results = await resultsByRow(h, run.run.id);
    expect(results[3]).toMatchObject({ status: 'skipped', message: expect.stringContaining('held back') });
  });

  it('always (the default) overwrites, and emptyCells skip (the default) leaves the CRM value of a blank cell alone', async () => {
    const [a, b] = seed([
      { phone: '+1 200-555-0011', tags: [tag(0), tag(1)] },
      { phone: '+1 200-555-0012', tags: [tag(2)] },
    ]) as [SimContact, SimContact];
    const mapping = mappingFile('defaults-mapping.json', {
      Name: { field: 'name', write: 'always' },
      Phone: { field: 'phone_number', emptyCells: 'skip' },
      Tags: { field: 'tag_ids', type: 'list' },
    });
    const file = h.file(
      'defaults.csv',
      csv(
        ['Email', 'Name', 'Phone', 'Tags'],
        [
          [a.email, 'Always A', '', ''],
          [b.email, b.name, '', ''],
        ],
      ),
    );
    h.ws.resetStats();
    const run = await reconcile(h, file, {
      op: 'contact.update',
      matchKey: 'email',
      keyColumn: 'Email',
      mapping: readMappingFile(mapping),
    });
    const done = await h.waitForRun(run.run.id);
    expect(run.counts).toMatchObject({ update: 1, skip: 1 });
    expect(done.counts).toMatchObject({ succeeded: 1, skipped: 1 });
    expect(h.ws.contacts.get(a.id)).toMatchObject({
      name: 'Always A',
      phone_number: '+1 200-555-0011',
      tag_ids: [tag(0), tag(1)],
    });
    expect(h.ws.contacts.get(b.id)).toMatchObject({ phone_number: '+1 200-555-0012', tag_ids: [tag(2)] });
  });

  it('a deal update whose name is "never" keeps the CRM\'s name (the API requires one) and writes the rest', async () => {
    // A copy: the simulator edits its records in place, so the record itself would always "keep" its name.
    const deal = { ...[...h.ws.deals.values()][2]! };
    const mapping = h.file(
      'deal-mapping.json',
      JSON.stringify({
        columns: { Title: { field: 'name', write: 'never' }, Amount: 'value' },
      }),
    );
    const file = h.file('deal-policy.csv', csv(['Number', 'Title', 'Amount'], [[deal.unique_number, 'Not This', 777]]));
    h.ws.resetStats();
    const run = await reconcile(h, file, { op: 'deal.update', keyColumn: 'Number', mapping: readMappingFile(mapping) });
    expect(run.counts).toMatchObject({ update: 1 });
    expect((await h.waitForRun(run.run.id)).counts).toMatchObject({ succeeded: 1 });
    expect(h.ws.deals.get(deal.id)).toMatchObject({ name: deal.name, value: 777 });
  });

  it('a plain import: never leaves the field out, clear sends the empty value, if-empty is refused before a run exists', async () => {
    const [a] = seed([{ phone: '+1 200-555-0021', tags: [tag(0)] }]) as [SimContact];
    const never = parseMapping(
      {
        columns: {
          Name: { field: 'name', write: 'never' },
          Phone: { field: 'phone_number', emptyCells: 'clear' },
          Tags: { field: 'tag_ids', type: 'list', emptyCells: 'clear' },
        },
      },
      'never',
    );
    const file = h.file('plain.csv', csv(['id', 'Name', 'Phone', 'Tags'], [[a.id, 'Plain A', '', '']]));
    h.ws.resetStats();
    const run = await h.importFile(file, 'contact.update', { mapping: { mapping: never, raw: {} } });
    const done = await h.waitForRun(run.id);
    expect(done.counts).toMatchObject({ succeeded: 1 });
    expect(h.ws.contacts.get(a.id)).toMatchObject({ name: a.name, phone_number: '', tag_ids: [] });

    const ifEmpty = parseMapping({ columns: { Phone: { field: 'phone_number', write: 'if-empty' } } }, 'if-empty');
    const runsBefore = (await h.runtime.store.listRuns({ limit: 1000 })).total;
    await expect(
      h.importFile(h.file('plain-if-empty.csv', csv(['id', 'Phone'], [[a.id, '+1 1']])), 'contact.update', {
        mapping: { mapping: ifEmpty, raw: {} },
      }),
    ).rejects.toMatchObject({
      code: 'USAGE',
      message: expect.stringContaining(
        'Phone (phone_number) has "write": "if-empty", which needs the CRM\'s current value',
      ),
    });
    const dealName = parseMapping({ columns: { Name: { field: 'name', write: 'never' } } }, 'deal name');
    await expect(
      h.importFile(h.file('plain-deal.csv', csv(['id', 'Name'], [['d1', 'x']])), 'deal.update', {
        mapping: { mapping: dealName, raw: {} },
      }),
    ).rejects.toMatchObject({
      code: 'USAGE',
      message: expect.stringContaining('requires a name on every deal update'),
    });
    expect((await h.runtime.store.listRuns({ limit: 1000 })).total).toBe(runsBefore);
    expect(writes(h)).toBe(1);
  });

  it('from the command line: import refuses if-empty without --reconcile (exit 2), import --reconcile and reconcile --out apply it', async () => {
    const [a, b] = seed([
      { phone: '+1 200-555-0031', tags: [] },
      { phone: '', tags: [] },
    ]) as [SimContact, SimContact];
    const mapping = mappingFile('cli-mapping.json', { Phone: { field: 'phone_number', write: 'if-empty' } });
    const file = h.file(
      'cli.csv',
      csv(
        ['Email', 'Phone'],
        [
          [a.email, '+1 400-555-0031'],
          [b.email, '+1 400-555-0032'],
        ],
      ),
    );
    const common = [
      '--op',
      'contact.update',
      '-w',
      'acme',
      '--mapping',
      mapping,
      '--match',
      'email',
      '--key-column',
      'Email',
    ];
    h.ws.resetStats();
    const plain = await cli(['import', file, '--op', 'contact.update', '-w', 'acme', '--mapping', mapping]);
    expect(plain.code).toBe(2);
    expect(plain.stderr).toContain('"write": "if-empty", which needs the CRM\'s current value');
    expect(plain.stderr).toContain('--reconcile');

    const planned = await cli(['reconcile', file, ...common, '--out', '-']);
    expect(planned.code).toBe(0);
    expect(planned.stderr).toContain('held back by write policies: phone_number in 1 row');
    const planLines = parse(planned.stdout, { columns: true }) as Array<Record<string, string>>;
    expect(planLines.map((l) => [l.action, l.held_back])).toEqual([
      [
        'skip',
        `phone_number: keeps +1 200-555-0031, not +1 400-555-0031 ("write": "if-empty", and the CRM already has a value)`,
      ],
      ['update', ''],
    ]);
    expect(writes(h)).toBe(0);

    const imported = await cli(['import', file, ...common, '--reconcile', '--work', '--json']);
    expect(imported.code).toBe(0);
    expect(h.ws.contacts.get(a.id)?.phone_number).toBe('+1 200-555-0031');
    expect(h.ws.contacts.get(b.id)?.phone_number).toBe('+1 400-555-0032');
    expect(h.ws.stats.writes.contactUpdate).toBe(1);
  }, 90_000);
});
