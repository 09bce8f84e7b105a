import { describe, expect, it } from 'vitest';
import { ROW_FIELD, RowDecoder, validateRow, type Mapping } from '../../src/ingest/index.js';
import type { Operation } from '../../src/crm/index.js';

const ingestValues = (op: Operation, values: Record<string, unknown>, mapping: Mapping) =>
  new RowDecoder({ op, mapping }).decodeValues(values);
import { parseMapping } from '../../src/ingest/index.js';

function errorsOf(result: ReturnType<typeof validateRow>) {
  return result.ok ? [] : result.errors;
}

describe('validateRow', () => {
  it('builds a deal.update payload', () => {
    expect(validateRow('deal.update', { id: 'd1', name: 'N', value: 5, tag_ids: ['a'] })).toEqual({
      ok: true,
      payload: { op: 'deal.update', id: 'd1', fields: { name: 'N', value: 5, tag_ids: ['a'] } },
    });
  });

  it('requires the id and, for deal.update, the name', () => {
    expect(errorsOf(validateRow('deal.update', { value: 5 }))).toEqual([
      { field: 'id', message: 'is required' },
      { field: 'name', message: 'is required' },
    ]);
    expect(errorsOf(validateRow('deal.update', { id: 'a/b', name: 'N' }))).toEqual([
      { field: 'id', message: 'must not contain spaces, "/", "\\", "?" or "#"' },
    ]);
  });

  it('rejects a bad status in plain words', () => {
    expect(errorsOf(validateRow('deal.create', { name: 'N', status: 'done' }))).toEqual([
      { field: 'status', message: 'must be one of in_progress, won, lost' },
    ]);
    expect(errorsOf(validateRow('lead.update', { id: 'l1', status: 'won' }))).toEqual([
      { field: 'status', message: 'must be one of open, converted, archived' },
    ]);
  });

  it('makes deal.create payloads without an id', () => {
    const result = validateRow('deal.create', { name: 'New', position: 2 });
    expect(result).toEqual({ ok: true, payload: { op: 'deal.create', fields: { name: 'New', position: 2 } } });
    expect(errorsOf(validateRow('deal.create', { id: 'x', name: 'N' }))).toEqual([
      { field: 'id', message: 'is not a field of deal.create' },
    ]);
  });

  it('refuses lead and contact updates that change nothing', () => {
    expect(errorsOf(validateRow('lead.update', { id: 'l1' }))).toEqual([
      { field: ROW_FIELD, message: 'a lead update needs at least one of name, status, owner_id, tag_ids' },
    ]);
    expect(errorsOf(validateRow('contact.update', { id: 'c1' }))).toEqual([
      {
        field: ROW_FIELD,
        message: 'a contact update needs at least one of name, email, phone_number, company_id, owner_id, tag_ids',
      },
    ]);
  });

  it("checks emails of contacts and invites by the spec's rule (host name labels, a top-level label, a sane local part)", () => {
    expect(errorsOf(validateRow('contact.update', { id: 'c1', email: 'not-an-email' }))).toEqual([
      { field: 'email', message: 'is not a valid email address: it has no "@"' },
    ]);
    expect(errorsOf(validateRow('team.invite', { email: 'x@', invited_by: 'boss' }))).toEqual([
      { field: 'email', message: 'is not a valid email address: it has no domain after the "@"' },
      { field: 'invited_by', message: 'is not a valid email address: it has no "@"' },
    ]);
    expect(validateRow('team.invite', { email: 'new@acme.io', send_invitation_email: 'false' })).toEqual({
      ok: true,
      payload: { op: 'team.invite', email: 'new@acme.io', options: { send_invitation_email: 'false' } },
    });
    const refused = [
      'x@bad-.example',
      'x@-bad.example',
      `x@${'a'.repeat(64)}.example`,
      'x@localhost',
      'x@a.b1',
      '.x@a.example',
      'x..y@a.example',
      `${'l'.repeat(65)}@a.example`,
      'x y@a.example',
      'x@a..example',
    ];
    for (const email of refused) expect(validateRow('contact.update', { id: 'c1', email }).ok, email).toBe(false);
    const accepted = [
      'x@a.example',
      'first.last+tag@sub.domain.example',
      `x@${'a'.repeat(63)}.example`,
      "o'neil@x-y.co",
      'x@xn--bcher-kva.example',
    ];
    for (const email of accepted) expect(validateRow('contact.update', { id: 'c1', email }).ok, email).toBe(true);
  });

  it('refuses record ids that would leave the record path or carry control characters', () => {
    for (const id of ['.', '..', 'a\u0000b', 'a\\b', ' '])
      expect(validateRow('contact.update', { id, name: 'N' }).ok, JSON.stringify(id)).toBe(false);
    expect(validateRow('lead.update', { id: '..', name: 'N' }).ok).toBe(false);
    expect(validateRow('deal.update', { id: '.', name: 'N' }).ok).toBe(false);
    expect(validateRow('contact.update', { id: 'c.1', name: 'N' }).ok).toBe(true);
  });

  it('names a bad list item by position', () => {
    expect(errorsOf(validateRow('lead.update', { id: 'l1', tag_ids: ['a', ' '] }))).toEqual([
      { field: 'tag_ids', message: 'item 2 must not be empty' },
    ]);
  });
});

describe('RowDecoder.decodeValues', () => {
  const mapping = parseMapping({ columns: { 'Deal ID': 'id', Title: 'name', Amount: 'value', Stage: 'status' } }, 'm');

  it('names errors by source column and does not pile "is required" on a failed cell', () => {
    expect(ingestValues('deal.update', { 'Deal ID': '', Title: 'T', Amount: 'lots', Stage: 'open' }, mapping)).toEqual({
      errors: [
        { field: 'Amount (value)', message: '"lots" is not a number' },
        { field: 'Deal ID (id)', message: 'is required' },
        { field: 'Stage (status)', message: 'must be one of in_progress, won, lost' },
      ],
    });
  });

  it('returns a payload for a good row', () => {
    expect(ingestValues('deal.update', { 'Deal ID': 'd9', Title: 'T', Amount: '10' }, mapping)).toEqual({
      payload: { op: 'deal.update', id: 'd9', fields: { name: 'T', value: 10 } },
    });
  });
});
