import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseMapping, readMappingFile, RowDecoder } from '../../src/ingest/index.js';
import { ReferenceIndex, type ReferencePass } from '../../src/references/index.js';

/*
 * The resolver itself (no CRM): names compare trimmed, case folded and NFKC-normalised; an id
 * of the kind passes through; lookup files in their JSON object form; value maps; the
 * did-you-mean of a name nothing resolves.
 */

const pass: ReferencePass = {
  list: 'deals',
  readAtMs: 1,
  pipelines: [
    { id: 'pip_s', name: 'Sales' },
    { id: 'pip_p', name: 'Partnerships' },
  ],
  stages: [
    { id: 'stg_neg', name: 'Negotiation', pipelineId: 'pip_s' },
    { id: 'stg_rev_s', name: 'Review', pipelineId: 'pip_s' },
    { id: 'stg_rev_p', name: 'Review', pipelineId: 'pip_p' },
  ],
  tags: [
    { id: 'tag_vip', name: 'VIP' },
    { id: 'tag_hot', name: 'Hot' },
  ],
  companies: [],
};
const index = new ReferenceIndex([pass]);

function decoder(columns: Record<string, unknown>, path = '/tmp/mapping.json'): RowDecoder {
  return new RowDecoder({ op: 'deal.update', mapping: parseMapping({ columns }, path), references: index });
}

describe('the reference resolver', () => {
  const stages = decoder({ Stage: { field: 'stage_id', by: 'name' }, Tags: { field: 'tag_ids', by: 'name' } });

  // The cell is trimmed before it is looked up (the column's default trim), so names keep it trimmed.
  it('compares names trimmed, case folded and NFKC-normalised', () => {
    for (const text of ['ｎｅｇｏｔｉａｔｉｏｎ ', 'NEGOTIATION', '  negotiation', 'Negotiation']) {
      const m = stages.mapValues({ id: 'd1', name: 'A', Stage: text });
      expect(m.errors, text).toEqual([]);
      expect(m.fields.stage_id, text).toBe('stg_neg');
      expect(m.names, text).toEqual([
        { field: 'stage_id', label: 'Stage (stage_id)', text: text.trim(), id: 'stg_neg' },
      ]);
    }
    expect(stages.mapValues({ id: 'd1', name: 'A', Tags: 'ＶＩＰ; hot' }).fields.tag_ids).toEqual([
      'tag_vip',
      'tag_hot',
    ]);
  });

  it('lets an id of the kind pass through, naming nothing', () => {
    const m = stages.mapValues({ id: 'd1', name: 'A', Stage: 'stg_neg', Tags: 'tag_hot; VIP' });
    expect(m.fields).toMatchObject({ stage_id: 'stg_neg', tag_ids: ['tag_hot', 'tag_vip'] });
    expect(m.names).toEqual([{ field: 'tag_ids', label: 'Tags (tag_ids)', text: 'VIP', id: 'tag_vip' }]);
  });

  it('says did-you-mean for a misspelt name, and names the candidates of an ambiguous one', () => {
    const unknown = stages.mapValues({ id: 'd1', name: 'A', Stage: 'Negotiaton' });
    expect(unknown.errors).toHaveLength(1);
    expect(unknown.errors[0]).toMatchObject({
      code: 'REFERENCE_UNKNOWN',
      value: 'Negotiaton',
      suggestion: 'Negotiation',
    });
    expect(unknown.errors[0]!.message).toMatch(
      /^"Negotiaton" is not a stage the CRM's records show \(did you mean "Negotiation"\?\)/,
    );
    const ambiguous = stages.mapValues({ id: 'd1', name: 'A', Stage: 'review' });
    expect(ambiguous.errors[0]).toMatchObject({ code: 'REFERENCE_AMBIGUOUS', value: 'review' });
    expect(ambiguous.errors[0]!.message).toContain('stg_rev_s (pipeline "Sales"), stg_rev_p (pipeline "Partnerships")');
    // The record's pipeline decides a shared name; a pipeline without it leaves it ambiguous.
    expect(
      stages.mapValues({ id: 'd1', name: 'A', Stage: 'review' }, { recordPipelineId: 'pip_p' }).fields.stage_id,
    ).toBe('stg_rev_p');
    expect(
      stages.mapValues({ id: 'd1', name: 'A', Stage: 'review' }, { recordPipelineId: 'pip_x' }).errors[0]?.code,
    ).toBe('REFERENCE_AMBIGUOUS');
  });

  it('reads a JSON lookup file in its object form, keys compared as names', () => {
    const dir = mkdtempSync(join(tmpdir(), 'resolver-'));
    writeFileSync(join(dir, 'owners.json'), JSON.stringify({ 'a@x.example': 'usr_1', 'B@x.example': 'usr_2' }));
    const mappingPath = join(dir, 'mapping.json');
    writeFileSync(
      mappingPath,
      JSON.stringify({
        columns: { Owner: { field: 'owner_id', lookup: { file: 'owners.json', key: 'email', value: 'id' } } },
      }),
    );
    const owners = new RowDecoder({ op: 'deal.update', mapping: readMappingFile(mappingPath).mapping });
    expect(owners.mapValues({ id: 'd1', name: 'A', Owner: ' A@X.example ' }).fields.owner_id).toBe('usr_1');
    expect(owners.mapValues({ id: 'd1', name: 'A', Owner: 'b@x.example' }).fields.owner_id).toBe('usr_2');
    const missing = owners.mapValues({ id: 'd1', name: 'A', Owner: 'a@x.exampel' });
    expect(missing.errors[0]).toMatchObject({ code: 'REFERENCE_UNKNOWN', suggestion: 'a@x.example' });
    expect(missing.errors[0]!.message).toContain(
      'is not a owners.json key (did you mean "a@x.example"?); add it to owners.json',
    );
  });

  it('maps fixed values case-insensitively, passes the API values, and names the allowed ones otherwise', () => {
    const status = decoder({ Status: { field: 'status', values: { 'Closed Won': 'won', Open: 'in_progress' } } });
    expect(status.mapValues({ id: 'd1', name: 'A', Status: 'CLOSED WON' }).fields.status).toBe('won');
    expect(status.mapValues({ id: 'd1', name: 'A', Status: 'in_progress' }).fields.status).toBe('in_progress');
    const bad = status.mapValues({ id: 'd1', name: 'A', Status: 'Closed Wn' });
    expect(bad.errors[0]!.message).toBe(
      '"Closed Wn" is not one of the mapped values (did you mean "Closed Won"?); allowed: "Closed Won", "Open", "won", "in_progress"',
    );
  });
});
