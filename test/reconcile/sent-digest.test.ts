import { describe, expect, it } from 'vitest';
import { checkDigest, digestHolds, sentDigest } from '../../src/reconcile/index.js';
import type { IndexedRecord } from '../../src/reconcile/index.js';

const deal = (values: Record<string, string>): IndexedRecord => ({ id: 'del_1', name: values.name ?? '', values });

describe('sent digest (what a succeeded row sent, for verify)', () => {
  it('names the sent fields, matches the record that holds them, and names a drifted field', () => {
    const digest = sentDigest('deals', {
      name: ' Acme deal ',
      value: '1200.50',
      tag_ids: ['b', 'a', 'a'],
      position: 3,
    })!;
    // name, value and tag_ids are bits 0, 1 and 6; position is never kept (the API never shows it).
    expect(digest).toMatch(/^[0-9a-z]+\.[A-Za-z0-9_-]{9}$/);
    expect(parseInt(digest.split('.')[0]!, 36)).toBe(0b1000011);
    const same = deal({ name: 'Acme deal', value: '1200.5', tag_ids: 'a\u001eb', status: 'won' });
    expect(checkDigest('deals', digest, same)).toEqual({ sent: ['name', 'value', 'tag_ids'], drifted: [] });
    const renamed = deal({ ...same.values, name: 'Renamed' });
    expect(checkDigest('deals', digest, renamed)).toEqual({ sent: ['name', 'value', 'tag_ids'], drifted: ['name'] });
    expect(digestHolds('deals', digest, 'name', 'Acme deal')).toBe(true);
    expect(digestHolds('deals', digest, 'name', 'Renamed')).toBe(false);
    expect(digestHolds('deals', digest, 'status', 'won')).toBe(false); // not sent
  });

  it('is absent when nothing comparable was sent, and unreadable digests are refused', () => {
    expect(sentDigest('deals', { position: 1 })).toBeUndefined();
    expect(checkDigest('deals', 'zz', deal({}))).toBeUndefined();
    expect(checkDigest('deals', '3.abc', deal({}))).toBeUndefined(); // two fields, one hash
  });
});
