import { describe, expect, it } from 'vitest';
import { CrmSyncError } from '../../src/errors/index.js';
import type { Operation } from '../../src/crm/index.js';
import {
  didYouMean,
  fieldsOf,
  loadMapping,
  nearest,
  parseMapping,
  readMappingFile,
  RowDecoder,
  type Mapping,
} from '../../src/ingest/index.js';

/** The decoder's mapping step alone (unknown columns skipped: these tests are about coercions). */
const mapRow = (op: Operation, values: Record<string, unknown>, mapping?: Mapping) =>
  new RowDecoder({ op, ...(mapping ? { mapping } : {}), ignoreUnknownColumns: true }).mapValues(values);
import { fixtureDir } from './fixtures.js';

const files = fixtureDir();

function thrown(fn: () => unknown): CrmSyncError {
  try {
    fn();
  } catch (err) {
    if (err instanceof CrmSyncError) return err;
    throw err;
  }
  throw new Error('expected a CrmSyncError');
}

const EXAMPLE = {
  columns: {
    'Deal ID': 'id',
    'Deal name': 'name',
    Amount: { field: 'value', type: 'number' },
    Tags: { field: 'tag_ids', type: 'list', separator: ';' },
    Stage: { field: 'stage_id', trim: true },
    Position: { field: 'position', type: 'integer' },
    Notes: null,
  },
  unmapped: 'ignore',
};

describe('mapping files', () => {
  it('loads the documented example and keeps the raw document', async () => {
    const path = await files.write('m.json', JSON.stringify(EXAMPLE));
    expect(loadMapping(path).columns['Deal ID']).toBe('id');
    expect(readMappingFile(path).raw).toEqual(EXAMPLE);
    expect(parseMapping({ columns: {} }, 'x').unmapped).toBe('error');
  });

  it('names the file and the JSON path of a problem', async () => {
    const path = await files.write(
      'bad.json',
      JSON.stringify({ columns: { Amount: { field: 'value', type: 'money' } } }),
    );
    const err = thrown(() => loadMapping(path));
    expect(err.code).toBe('MAPPING_INVALID');
    expect(err.message).toContain(path);
    expect(err.message).toContain(
      'at $.columns.Amount.type: must be one of string, number, integer, list, boolean-string',
    );
    await files.write('garbage.json', '{"columns": ');
    const notJson = thrown(() => loadMapping(files.path('missing.json')));
    expect(notJson.message).toContain('does not exist');
    const garbage = thrown(() => readMappingFile(files.path('garbage.json')));
    expect(garbage.message).toMatch(/garbage\.json: not valid JSON/);
  });

  it('rejects two columns mapped to one field', () => {
    const err = thrown(() => parseMapping({ columns: { A: 'name', B: { field: 'name' } } }, 'dup.json'));
    expect(err.message).toMatch(/dup\.json: at \$\.columns\.B: maps to "name", which column "A" already maps to/);
  });

  it('rejects a field the operation does not have, naming column, field and the valid fields', () => {
    const mapping = parseMapping({ columns: { Email: 'email' } }, 'm.json');
    const err = thrown(() => mapRow('deal.update', { Email: 'a@b.co' }, mapping));
    expect(err.code).toBe('MAPPING_INVALID');
    expect(err.message).toContain('column "Email" maps to "email"');
    expect(err.message).toContain('deal.update');
    expect(err.message).toContain(fieldsOf('deal.update').join(', '));
  });

  it('lists the row fields of every operation', () => {
    expect(fieldsOf('deal.update')).toEqual([
      'id',
      'name',
      'value',
      'status',
      'owner_id',
      'stage_id',
      'pipeline_id',
      'position',
      'tag_ids',
    ]);
    expect(fieldsOf('deal.create')).not.toContain('id');
    expect(fieldsOf('lead.update')).toEqual(['id', 'name', 'status', 'owner_id', 'tag_ids']);
    expect(fieldsOf('contact.update')).toEqual([
      'id',
      'name',
      'email',
      'phone_number',
      'company_id',
      'owner_id',
      'tag_ids',
    ]);
    expect(fieldsOf('team.invite')).toEqual(['email', 'organization_role', 'invited_by', 'send_invitation_email']);
  });
});

describe('mapRow coercions', () => {
  const mapping = parseMapping(EXAMPLE, 'example');

  it('applies each type, trims, and omits empty cells', () => {
    const { fields, errors } = mapRow(
      'deal.update',
      {
        'Deal ID': ' 42 ',
        'Deal name': '  Big deal ',
        Amount: ' 1200.50 ',
        Tags: ' a ; ;b;',
        Stage: '  ',
        Position: '3',
        Notes: 'ignored',
        Other: 'x',
      },
      mapping,
    );
    expect(errors).toEqual([]);
    expect(fields).toEqual({ id: '42', name: 'Big deal', value: 1200.5, tag_ids: ['a', 'b'], position: 3 });
    expect(Object.keys(fields)).not.toContain('stage_id');
  });

  it('keeps spaces when trim is false', () => {
    const m = parseMapping({ columns: { N: { field: 'name', trim: false } } }, 'm');
    expect(mapRow('deal.update', { N: ' x ' }, m).fields).toEqual({ name: ' x ' });
  });

  it('turns yes/no/1/0/true/false into the API strings for send_invitation_email', () => {
    const m = parseMapping({ columns: { Send: { field: 'send_invitation_email', type: 'boolean-string' } } }, 'm');
    const values = ['yes', 'No', '1', '0', 'TRUE', 'false'].map(
      (v) => mapRow('team.invite', { Send: v }, m).fields.send_invitation_email,
    );
    expect(values).toEqual(['true', 'false', 'true', 'false', 'true', 'false']);
    expect(mapRow('team.invite', { Send: 'maybe' }, m).errors).toEqual([
      { field: 'Send (send_invitation_email)', message: '"maybe" is not yes or no (use true, false, yes, no, 1 or 0)' },
    ]);
  });

  it('reports a coercion failure as a field error named by the source column', () => {
    const { fields, errors } = mapRow('deal.update', { 'Deal ID': '1', Amount: '12,5x', Position: '2.5' }, mapping);
    expect(fields).toEqual({ id: '1' });
    expect(errors).toEqual([
      {
        field: 'Amount (value)',
        message: '"12,5x" is not a number (use a dot for decimals and no thousands separators)',
      },
      { field: 'Position (position)', message: '"2.5" is not a whole number' },
    ]);
  });

  it('infers types from the target field when the mapping gives none', () => {
    const m = parseMapping(
      { columns: { Amount: 'value', Tags: { field: 'tag_ids', separator: '|' }, Pos: 'position' } },
      'm',
    );
    expect(mapRow('deal.update', { Amount: '7', Tags: 'x|y', Pos: '4' }, m).fields).toEqual({
      value: 7,
      tag_ids: ['x', 'y'],
      position: 4,
    });
  });

  it('without a mapping, maps columns named like API fields with inferred coercions and ignores the rest', () => {
    const { fields, errors } = mapRow(
      'deal.update',
      { id: '9', name: 'N', value: '5', position: '1', tag_ids: 't1;t2', Comment: 'x', status: '' },
      undefined,
    );
    expect(errors).toEqual([]);
    expect(fields).toEqual({ id: '9', name: 'N', value: 5, position: 1, tag_ids: ['t1', 't2'] });
    expect(mapRow('team.invite', { email: 'a@b.co', send_invitation_email: 'no' }).fields).toEqual({
      email: 'a@b.co',
      send_invitation_email: 'false',
    });
  });

  it('takes JSON values as they are, keeps an explicit empty list, and never turns a number into text silently', () => {
    const { fields, errors } = mapRow(
      'deal.update',
      { id: 12, name: 'N', value: 3.5, tag_ids: [], position: null },
      undefined,
    );
    expect(errors).toEqual([
      {
        field: 'id',
        message: expect.stringMatching(/^must be text, not a number \(12\); quote it .*"type": "string"/),
      },
    ]);
    expect(fields).toEqual({ name: 'N', value: 3.5, tag_ids: [] });
    const typed = parseMapping(
      { columns: { id: { field: 'id', type: 'string' }, name: { field: 'name', type: 'string' } } },
      'm',
    );
    expect(mapRow('deal.update', { id: 7, name: 42 }, typed)).toEqual({ fields: { id: '7', name: '42' }, errors: [] });
    const list = parseMapping({ columns: { tags: { field: 'tag_ids', type: 'list' } } }, 'm');
    expect(mapRow('deal.update', { tags: 7 }, list).fields).toEqual({ tag_ids: ['7'] });
    expect(mapRow('deal.update', { tag_ids: 7 }).errors).toEqual([
      { field: 'tag_ids', message: expect.stringMatching(/^must be text, not a number \(7\)/) },
    ]);
    expect(mapRow('deal.update', { tag_ids: ['a', 7] }).errors).toEqual([
      { field: 'tag_ids', message: expect.stringMatching(/^item 2 must be text, not a number/) },
    ]);
    expect(mapRow('deal.update', { name: { first: 'x' } }).errors).toEqual([
      { field: 'name', message: 'must be text, not an object' },
    ]);
  });
});

describe('a mapping file that names only the odd column (issue 31)', () => {
  const mapping = parseMapping({ columns: { Phone: 'phone_number' } }, 'phone.json');

  it('columns named like a field map themselves beside it: id,name,Phone is accepted', () => {
    const decoder = new RowDecoder({ op: 'contact.update', mapping });
    expect(() => decoder.checkColumns(['id', 'name', 'Phone'], true)).not.toThrow();
    expect(decoder.decodeValues({ id: 'c1', name: 'Ada', Phone: ' +49 30 1 ' })).toEqual({
      payload: expect.objectContaining({ id: 'c1', fields: { name: 'Ada', phone_number: '+49 30 1' } }),
    });
  });

  it('a file without the self-mapping columns is not missing anything; one without the named column is', () => {
    const decoder = new RowDecoder({ op: 'contact.update', mapping });
    expect(() => decoder.checkColumns(['id', 'Phone'], true)).not.toThrow();
    expect(thrown(() => decoder.checkColumns(['id', 'name'], true)).message).toContain(
      'the mapping names column "Phone", which the file does not have',
    );
  });

  it('a field the mapping fills from another column, or a column it skips, does not map itself', () => {
    const renamed = parseMapping({ columns: { 'Full name': 'name', email: null } }, 'm.json');
    const decoder = new RowDecoder({ op: 'contact.update', mapping: renamed });
    const err = thrown(() => decoder.checkColumns(['id', 'Full name', 'name', 'email'], true));
    expect(err.code).toBe('INPUT_COLUMNS');
    expect(err.message).toMatch(/column\(s\) "name" map to no field/);
    expect(decoder.ignoredColumns(['id', 'Full name', 'email'])).toEqual(['email']);
    expect(decoder.decodeValues({ id: 'c1', 'Full name': 'Ada', email: 'a@b.example' })).toEqual({
      payload: expect.objectContaining({ fields: { name: 'Ada' } }),
    });
  });
});

describe('field write policies in a mapping (issue 33)', () => {
  const rule = (extra: Record<string, unknown>, field = 'phone_number') => ({
    columns: { Email: 'email', Phone: { field, ...extra } },
  });

  it('defaults to write always and emptyCells skip; takes if-empty, never and clear', () => {
    const decoder = new RowDecoder({ op: 'contact.update', mapping: parseMapping(rule({}), 'm') });
    expect(decoder.policyOf('phone_number')).toEqual({ write: 'always', emptyCells: 'skip', compare: 'crm' });
    expect(decoder.policyOf('name')).toEqual({ write: 'always', emptyCells: 'skip', compare: 'crm' });
    const set = new RowDecoder({
      op: 'contact.update',
      mapping: parseMapping(rule({ write: 'if-empty', emptyCells: 'clear' }), 'm'),
    });
    expect(set.policyOf('phone_number')).toEqual({ write: 'if-empty', emptyCells: 'clear', compare: 'crm' });
    expect(set.needsCrmValues()).toEqual([
      `Phone (phone_number) has "write": "if-empty", which needs the CRM's current value`,
    ]);
  });

  it('refuses unknown values and names the settings', () => {
    expect(thrown(() => parseMapping(rule({ write: 'sometimes' }), 'm.json')).message).toContain(
      'at $.columns.Phone.write: must be one of always, if-empty, never',
    );
    expect(thrown(() => parseMapping(rule({ emptyCells: 'erase' }), 'm.json')).message).toContain(
      'at $.columns.Phone.emptyCells: must be one of skip, clear',
    );
    expect(thrown(() => parseMapping(rule({ writes: 'never' }), 'm.json')).message).toContain(
      'use field, type, separator, trim, write, emptyCells, compare',
    );
  });

  it('compares as the CRM does unless a column says "compare": "exact"; other values are refused', () => {
    const exact = new RowDecoder({
      op: 'contact.update',
      mapping: parseMapping({ columns: { Email: { field: 'email', compare: 'exact' } } }, 'm'),
    });
    expect(exact.policyOf('email').compare).toBe('exact');
    expect(exact.policyOf('phone_number').compare).toBe('crm');
    const err = thrown(() => parseMapping({ columns: { Email: { field: 'email', compare: 'case' } } }, 'm.json'));
    expect(err.code).toBe('MAPPING_INVALID');
    expect(err.message).toBe('m.json: at $.columns.Email.compare: must be one of crm, exact');
  });

  it('clear only where the API can hold an empty value (phone_number, tag_ids), and never on the record id', () => {
    const name = new RowDecoder({ op: 'contact.update', ignoreUnknownColumns: true });
    expect(name.policyOf('id').write).toBe('always');
    expect(
      thrown(
        () =>
          new RowDecoder({ op: 'contact.update', mapping: parseMapping(rule({ emptyCells: 'clear' }, 'name'), 'm') }),
      ).message,
    ).toBe(
      `mapping: column "Phone" has "emptyCells": "clear", but the API cannot empty name (of contact.update's fields only phone_number, tag_ids can be cleared); use "skip" (an empty cell leaves the value alone)`,
    );
    expect(
      thrown(
        () =>
          new RowDecoder({
            op: 'deal.update',
            mapping: parseMapping({ columns: { S: { field: 'status', emptyCells: 'clear' } } }, 'm'),
          }),
      ).message,
    ).toContain(`of deal.update's fields only tag_ids can be cleared`);
    expect(
      thrown(() => new RowDecoder({ op: 'contact.update', mapping: parseMapping(rule({ write: 'never' }, 'id'), 'm') }))
        .message,
    ).toContain('maps to id, which finds the record and is never written');
    expect(
      thrown(
        () =>
          new RowDecoder({
            op: 'team.invite',
            mapping: parseMapping(rule({ write: 'never' }, 'organization_role'), 'm'),
          }),
      ).message,
    ).toContain('write policies apply to record updates, not to team.invite');
  });

  it('an empty cell clears with the API empty value; a missing key or a skip column leaves the field out', () => {
    const mapping = parseMapping(
      {
        columns: {
          Phone: { field: 'phone_number', emptyCells: 'clear' },
          Tags: { field: 'tag_ids', type: 'list', emptyCells: 'clear' },
          Name: { field: 'name' },
        },
      },
      'm',
    );
    const decoder = new RowDecoder({ op: 'contact.update', mapping, ignoreUnknownColumns: true });
    expect(decoder.mapValues({ Phone: '  ', Tags: ';', Name: '' }).fields).toEqual({ phone_number: '', tag_ids: [] });
    expect(decoder.mapValues({ Phone: null }).fields).toEqual({ phone_number: '' });
    expect(decoder.mapValues({ Name: 'x' }).fields).toEqual({ name: 'x' });
    expect(decoder.decodeValues({ id: 'c1', Phone: '', Name: 'x' }).payload).toMatchObject({
      op: 'contact.update',
      id: 'c1',
      fields: { phone_number: '', name: 'x' },
    });
  });

  it('without CRM values an update leaves out never fields; a create sends them (a new record has nothing to overwrite)', () => {
    const mapping = parseMapping(
      { columns: { Name: { field: 'name', write: 'never' }, Value: { field: 'value', write: 'never' } } },
      'm',
    );
    const update = new RowDecoder({ op: 'deal.update', mapping, ignoreUnknownColumns: true });
    expect(update.needsCrmValues()).toEqual([
      'Name (name) has "write": "never", but the API requires a name on every deal update; only reconcile can keep the CRM\'s',
    ]);
    const lead = new RowDecoder({
      op: 'lead.update',
      mapping: parseMapping({ columns: { Owner: { field: 'owner_id', write: 'never' } } }, 'm'),
      ignoreUnknownColumns: true,
    });
    expect(lead.needsCrmValues()).toEqual([]);
    expect(lead.decodeValues({ id: 'l1', Owner: 'o1', name: 'N' }).payload).toEqual({
      op: 'lead.update',
      id: 'l1',
      fields: { name: 'N' },
    });
    const create = new RowDecoder({ op: 'deal.create', mapping, ignoreUnknownColumns: true });
    expect(create.needsCrmValues()).toEqual([]);
    expect(create.decodeValues({ Name: 'N', Value: '5' }).payload).toMatchObject({ fields: { name: 'N', value: 5 } });
  });
});

describe('did you mean', () => {
  it('never suggests the name itself', () => {
    expect(nearest('id', ['id', 'name'])).toBeUndefined();
    expect(didYouMean('name', ['name'])).toBe('');
    expect(didYouMean('phone', ['phone', 'phone_number'])).toBe(' (did you mean "phone_number"?)');
    // Another spelling of the same name is a suggestion.
    expect(didYouMean('Email', ['email'])).toBe(' (did you mean "email"?)');
  });

  it('a column named after its record and field means the field (an export\'s "Contact ID")', () => {
    expect(nearest('Contact ID', ['id', 'name', 'email'])).toBe('id');
    expect(nearest('Owner ID', ['id', 'owner_id'])).toBe('owner_id');
    // A one-letter field is no suffix match.
    expect(nearest('Stage X', ['x'])).toBeUndefined();
  });
});
