import { describe, expect, it } from 'vitest';
import { RecordIndex } from '../../src/reconcile/record-index.js';
import { StringTable } from '../../src/reconcile/string-table.js';

const contact = (id: string, email: string, name = `name of ${id}`) => ({
  id,
  name,
  email,
  phone_number: '+1 555 0100',
  owner: null,
  tags: [],
  company: { id: null, name: null },
  created_at: '2024-01-01T00:00:00.000Z',
  updated_at: '2024-01-01T00:00:00.000Z',
});

describe('StringTable', () => {
  it('finds every entry holding a string, across chunks and hash growth, and keeps non-ASCII text', () => {
    const t = new StringTable(true);
    const n = 20_000; // far past the first 4 KB chunk and the first hash table
    for (let i = 0; i < n; i++) t.add(`key-${i % 5000}-ünï`);
    expect(t.size).toBe(n);
    expect(t.get(12_345)).toBe('key-2345-ünï');
    expect(t.findAll('key-2345-ünï')).toEqual([2345, 7345, 12_345, 17_345]);
    expect(t.find('key-4999-ünï')).toBe(4999);
    expect(t.find('key-5000-ünï')).toBe(-1);
    expect(t.findAll('nothing')).toEqual([]);
  });

  it('replaces an entry of a plain table, and refuses to in a hashed one', () => {
    const t = new StringTable();
    t.add('a');
    t.add('b');
    t.set(0, 'a longer text than before');
    expect([t.get(0), t.get(1)]).toEqual(['a longer text than before', 'b']);
    expect(() => new StringTable(true).set(0, 'x')).toThrow(/hashed/);
  });
});

describe('RecordIndex (packed in string tables)', () => {
  it('answers by id and by key, keeps places in list order and a key held twice as ambiguous', () => {
    const index = new RecordIndex('contacts', 'email', { keepPlaces: true });
    for (let i = 0; i < 3000; i++) index.add(contact(`con_${i}`, `Person${i}@Example.com`));
    index.add(contact('con_twin', ' person7@example.com '));
    expect(index.size).toBe(3001);
    expect(index.byId(' con_42 ')).toMatchObject({ id: 'con_42', name: 'name of con_42' });
    expect(index.byId('con_42')!.values.email).toBe('Person42@Example.com');
    expect(index.byId('con_nope')).toBeUndefined();
    expect(index.lookup('PERSON1234@example.com').map((r) => r.id)).toEqual(['con_1234']);
    expect(index.lookup('person7@example.com').map((r) => r.id)).toEqual(['con_7', 'con_twin']);
    expect(index.lookup('nobody@example.com')).toEqual([]);
    expect([index.placeOf('con_0'), index.placeOf('con_2999'), index.placeOf('con_twin')]).toEqual([0, 2999, 3000]);
    expect([...index.all()].map((r) => r.id).slice(0, 3)).toEqual(['con_0', 'con_1', 'con_2']);
  });

  it('a record read twice keeps its first place and its newer values, and is not its own twin', () => {
    const index = new RecordIndex('contacts', 'email', { keepPlaces: true });
    index.add(contact('con_a', 'a@example.com', 'Old Name'));
    index.add(contact('con_b', 'b@example.com'));
    index.add(contact('con_a', 'a@example.com', 'New Name'));
    expect(index.size).toBe(2);
    expect(index.placeOf('con_a')).toBe(0);
    expect(index.byId('con_a')!.name).toBe('New Name');
    expect(index.lookup('a@example.com').map((r) => r.name)).toEqual(['New Name']);
  });

  it('says places and creation times only when asked to keep them', () => {
    const plain = new RecordIndex('deals', 'id');
    const kept = new RecordIndex('deals', 'id', { keepCreatedAt: true });
    const deal = { id: 'deal_1', name: 'D', created_at: '2024-02-03T04:05:06.000Z', tags: [] };
    plain.add(deal as never);
    kept.add(deal as never);
    expect([plain.placeOf('deal_1'), plain.createdAt('deal_1'), plain.slotOf('deal_1')]).toEqual([
      undefined,
      undefined,
      0,
    ]);
    expect(kept.createdAt('deal_1')).toBe(Date.parse('2024-02-03T04:05:06.000Z'));
    expect(kept.lookup('deal_1').map((r) => r.id)).toEqual(['deal_1']);
  });
});
