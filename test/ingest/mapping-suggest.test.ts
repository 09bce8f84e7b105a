import { describe, expect, it } from 'vitest';
import { parseMapping, suggestMapping } from '../../src/ingest/index.js';

describe('suggestMapping (the dashboard mapping table, issue 45)', () => {
  it('offers the same name, then the did-you-mean the CLI gives; a field goes to one column only', () => {
    const s = suggestMapping('contact.update', ['E-mail', 'Full name', 'Phone', 'name', 'Notes', 'Email']);
    expect(s.map((x) => [x.column, x.field, x.from])).toEqual([
      ['E-mail', 'email', 'did you mean'],
      // "name" is a field of its own name: it wins over the near "Full name".
      ['Full name', null, 'none'],
      ['Phone', 'phone_number', 'did you mean'],
      ['name', 'name', 'same name'],
      ['Notes', null, 'none'],
      // Taken by E-mail already: two columns on one field are refused by the mapping.
      ['Email', null, 'none'],
    ]);
  });

  it('the remembered mapping comes first, with its rules, and a column it skipped stays skipped', () => {
    const remembered = parseMapping(
      { columns: { Mobile: { field: 'phone_number', write: 'if-empty' }, 'E-mail': null, Who: 'name' } },
      'test',
    );
    const s = suggestMapping('contact.update', ['E-mail', 'Mobile', 'Who', 'email'], remembered);
    expect(s.map((x) => [x.column, x.field, x.from])).toEqual([
      ['E-mail', null, 'remembered'],
      ['Mobile', 'phone_number', 'remembered'],
      ['Who', 'name', 'remembered'],
      ['email', 'email', 'same name'],
    ]);
    expect(s[1]!.rule).toEqual({ field: 'phone_number', write: 'if-empty' });
  });
});
