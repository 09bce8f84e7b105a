import { describe, expect, it } from 'vitest';
import { parseMapping, suggestMapping } from '../../src/ingest/index.js';
import { ReferenceIndex } from '../../src/references/index.js';

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
    const s = suggestMapping('contact.update', ['E-mail', 'Mobile', 'Who', 'email'], { remembered });
    expect(s.map((x) => [x.column, x.field, x.from])).toEqual([
      ['E-mail', null, 'remembered'],
      ['Mobile', 'phone_number', 'remembered'],
      ['Who', 'name', 'remembered'],
      ['email', 'email', 'same name'],
    ]);
    expect(s[1]!.rule).toEqual({ field: 'phone_number', write: 'if-empty' });
  });

  it('a reference column of names is offered by name; of ids, not; the remembered choice stands', () => {
    const samples = {
      Stage: ['Negotiation', 'Closed Won'],
      'Pipeline id': ['pip_4f1a9c', '', '6f1c2e1a-55b2-4c1e-9d1e-0b4a6c7d8e9f'],
      tag_ids: ['tag_91ce; VIP'],
    };
    const s = suggestMapping('deal.update', ['Stage', 'Pipeline id', 'tag_ids'], { samples });
    expect(s.map((x) => [x.column, x.field, x.by])).toEqual([
      ['Stage', 'stage_id', 'name'],
      ['Pipeline id', 'pipeline_id', undefined],
      // One item of the list is a name.
      ['tag_ids', 'tag_ids', 'name'],
    ]);
    const company = suggestMapping('contact.update', ['company_id'], { samples: { company_id: ['Q3 Partners'] } });
    expect(company[0]).toMatchObject({ field: 'company_id', by: 'name' });
    // What the workspace's references know decides before the shape: a known id, a known name.
    const references = new ReferenceIndex([
      {
        list: 'deals',
        readAtMs: 1,
        pipelines: [],
        stages: [{ id: 'Won', name: 'Won', pipelineId: 'p' }],
        tags: [{ id: 't1', name: 'B2B-2025' }],
        companies: [],
      },
    ]);
    const known = suggestMapping('deal.update', ['Stage', 'tag_ids'], {
      samples: { Stage: ['Won'], tag_ids: ['B2B-2025'] },
      references,
    });
    expect(known.map((x) => x.by)).toEqual([undefined, 'name']);
    const remembered = parseMapping({ columns: { Stage: 'stage_id', T: { field: 'tag_ids', by: 'name' } } }, 't');
    const again = suggestMapping('deal.update', ['Stage', 'T'], {
      remembered,
      samples: { Stage: ['Negotiation'], T: ['tag_1'] },
    });
    expect(again.map((x) => [x.field, x.by])).toEqual([
      ['stage_id', undefined],
      ['tag_ids', 'name'],
    ]);
  });
});
