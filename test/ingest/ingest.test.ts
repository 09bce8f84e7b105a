import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { isCrmSyncError } from '../../src/errors/index.js';
import { ingest, parseMapping, ROW_FIELD, RowDecoder, type IngestedRow } from '../../src/ingest/index.js';
import { collect, fixtureDir } from './fixtures.js';

const files = fixtureDir();

describe('ingest', () => {
  it('gives every input row exactly one result: a payload or errors with the line', async () => {
    const csv = [
      'Deal ID,Deal name,Amount,Tags,Stage',
      'd1,First,100,a;b,won',
      'd2,,5,,',
      'd3,Third,"12,5x",,',
      'd4,Fourth,1,2,3,4',
      'd5,"Fifth',
      'still fifth",7,,lost',
    ].join('\n');
    const mapping = parseMapping(
      {
        columns: {
          'Deal ID': 'id',
          'Deal name': 'name',
          Amount: { field: 'value', type: 'number' },
          Tags: 'tag_ids',
          Stage: 'status',
        },
      },
      'm.json',
    );
    const { reader, rows } = await ingest(await files.write('deals.csv', csv), { op: 'deal.update', mapping });
    const out = JSON.parse(JSON.stringify(await collect(rows))) as IngestedRow[];
    expect(reader.format).toBe('csv');
    expect(reader.columns).toEqual(['Deal ID', 'Deal name', 'Amount', 'Tags', 'Stage']);
    expect(out.map((r) => [r.row, r.line, r.payload ? 'payload' : r.code])).toEqual([
      [1, 2, 'payload'],
      [2, 3, 'ROW_INVALID'],
      [3, 4, 'ROW_INVALID'],
      [4, 5, 'INPUT_PARSE'],
      [5, 6, 'payload'],
    ]);
    expect(out[0]?.payload).toEqual({
      op: 'deal.update',
      id: 'd1',
      fields: { name: 'First', value: 100, tag_ids: ['a', 'b'], status: 'won' },
    });
    expect(out[1]?.errors).toEqual([{ field: 'Deal name (name)', message: 'is required' }]);
    expect(out[2]?.errors?.[0]).toEqual({
      field: 'Amount (value)',
      message: '"12,5x" is not a number (use a dot for decimals and no thousands separators)',
    });
    expect(out[3]).toMatchObject({
      errors: [
        { field: ROW_FIELD, message: 'line 5: expected 5 fields, found 6 (a value containing "," must be quoted)' },
      ],
    });
    expect(out[4]?.payload).toMatchObject({ fields: { name: 'Fifth\nstill fifth', value: 7, status: 'lost' } });
    for (const r of out) {
      expect(r.payload === undefined).toBe(r.errors !== undefined);
      expect(r.original).toBeDefined();
    }
  });

  it('maps NDJSON invites without a mapping', async () => {
    const text = '{"email":"a@acme.io","send_invitation_email":false}\n\n{"email":"nope"}\n';
    const out = await collect((await ingest(await files.write('team.ndjson', text), { op: 'team.invite' })).rows);
    expect(out.map((r) => [r.row, r.line])).toEqual([
      [1, 1],
      [2, 3],
    ]);
    expect(out[0]?.payload).toEqual({
      op: 'team.invite',
      email: 'a@acme.io',
      options: { send_invitation_email: 'false' },
    });
    expect(out[1]).toMatchObject({
      code: 'ROW_INVALID',
      errors: [{ field: 'email', message: 'is not a valid email address: it has no "@"' }],
    });
  });

  it('throws MAPPING_INVALID before reading when the mapping targets a field the operation lacks', async () => {
    const mapping = parseMapping({ columns: { Value: 'value' } }, 'm.json');
    await expect(ingest('/nonexistent.csv', { op: 'lead.update', mapping })).rejects.toThrow(
      /column "Value" maps to "value", which lead.update does not have; valid fields are id, name, status, owner_id, tag_ids/,
    );
  });

  it('refuses columns the mapping does not name before any row is read (null columns are fine), and a JSON row with a late unknown key', async () => {
    const mapping = parseMapping({ columns: { id: 'id', name: 'name', Notes: null } }, 'm.json');
    expect(mapping.unmapped).toBe('error');
    const ok = await collect(
      (await ingest(await files.write('known.csv', 'id,name,Notes\n1,A,x\n'), { op: 'deal.update', mapping })).rows,
    );
    expect(ok[0]?.payload).toBeDefined();
    const err = await ingest(await files.write('unknown.csv', 'id,name,Extra\n1,A,x\n'), {
      op: 'deal.update',
      mapping,
    }).catch((e: unknown) => e);
    expect(isCrmSyncError(err, 'INPUT_COLUMNS')).toBe(true);
    expect((err as Error).message).toContain('"Extra"');
    const json = await ingest(
      await files.write('late.ndjson', '{"id":"1","name":"A"}\n{"id":"2","name":"B","Surprise":1}\n'),
      { op: 'deal.update', mapping },
    );
    const rows = await collect(json.rows);
    expect(rows[0]?.payload).toBeDefined();
    expect(rows[1]).toMatchObject({
      row: 2,
      line: 2,
      code: 'ROW_INVALID',
      errors: [{ field: 'Surprise', message: expect.stringContaining('maps to no field of deal.update') }],
    });
    const ignoring = await ingest(files.path('unknown.csv'), {
      op: 'deal.update',
      mapping,
      ignoreUnknownColumns: true,
    });
    expect(ignoring.decoder.ignoredColumns(ignoring.reader.columns)).toEqual(['Extra']);
    // A null column is skipped on purpose and listed; a column the caller reads itself is not.
    const keyed = new RowDecoder({ op: 'deal.update', mapping, extraColumns: ['unique_number'] });
    expect(keyed.ignoredColumns(['id', 'name', 'Notes', 'unique_number'])).toEqual(['Notes']);
  });

  it('streams a 200,000-row CSV: every row comes out once, numbered 1..N', async () => {
    const n = 200_000;
    const path = files.path('big.csv');
    const out = createWriteStream(path);
    out.write('id,name,value,tag_ids\n');
    for (let i = 1; i <= n; i++) {
      // Every 1000th row carries a quoted name with a line break, so line and row differ.
      const name = i % 1000 === 0 ? `"Deal ${i}\nsecond line"` : `Deal ${i}`;
      if (!out.write(`d${i},${name},${i % 97}.5,t${i % 7};t${i % 3}\n`)) await once(out, 'drain');
    }
    out.end();
    await once(out, 'finish');

    const { reader, rows } = await ingest(path, { op: 'deal.update' });
    let count = 0;
    let expectedLine = 2;
    let payloads = 0;
    let outOfOrder = 0;
    for await (const r of rows) {
      count++;
      if (r.row !== count || r.line !== expectedLine) outOfOrder++;
      expectedLine += r.row % 1000 === 0 ? 2 : 1;
      if (r.payload !== undefined) payloads++;
    }
    expect(outOfOrder).toBe(0);
    expect(count).toBe(n);
    expect(payloads).toBe(n);
    expect(reader.bytesRead).toBe(reader.totalBytes);
  }, 120_000); // ~2 s on a quiet machine, 27 s seen at load 25 on two cores
});
