import { describe, expect, it } from 'vitest';
import { ContactSchema, DealSchema, LeadSchema, listPageSchema, tagIdOf, tagNameOf } from '../../src/crm/index.js';
import { leadRecord, ts } from './fixtures.js';

const deal = {
  id: 'd1',
  name: 'Big deal',
  status: 'in_progress',
  value: 1200.5,
  currency: 'USD',
  price: '$1,200.50',
  unique_number: 'D-0001',
  contact: { id: 'c1', name: 'Ann' },
  company: null,
  owner: null,
  pipeline: null,
  stage: { id: 's1', name: 'New' },
  tags: [{ id: 't1', name: 'vip', style: 'red' }],
  created_at: ts,
  updated_at: ts,
};
const contact = {
  id: 'c1',
  name: 'Ann',
  email: 'ann@example.com',
  phone_number: '',
  created_at: ts,
  updated_at: ts,
  owner: 'Bob',
  tags: [],
  company: { id: null, name: null },
};

describe('record schemas', () => {
  it('accept a spec-shaped deal and keep unknown extra fields', () => {
    const parsed = DealSchema.parse({ ...deal, custom_field: 42 });
    expect(parsed.name).toBe('Big deal');
    expect((parsed as Record<string, unknown>).custom_field).toBe(42);
  });

  it('reject wrong types, bad enums and unreadable timestamps', () => {
    expect(DealSchema.safeParse({ ...deal, id: 7 }).success).toBe(false);
    expect(DealSchema.safeParse({ ...deal, status: 'open' }).success).toBe(false);
    expect(DealSchema.safeParse({ ...deal, updated_at: 'yesterday' }).success).toBe(false);
    expect(DealSchema.safeParse({ ...deal, tags: ['vip'] }).success).toBe(false);
  });

  it('normalise Tag-shaped tags of leads/contacts and keep other shapes', () => {
    const parsed = ContactSchema.parse({
      ...contact,
      tags: [{ id: 't1', name: 'vip', style: 'red', extra: 1 }, 'plain', { id: 9 }],
    });
    expect(parsed.tags).toHaveLength(3);
    expect(parsed.tags.map(tagIdOf)).toEqual(['t1', 'plain', '9']);
    expect(parsed.tags.map(tagNameOf)).toEqual(['vip', undefined, undefined]);
  });

  it('lead contact/company ids may be null', () => {
    const lead = leadRecord;
    expect(LeadSchema.safeParse(lead).success).toBe(true);
    expect(LeadSchema.safeParse({ ...lead, status: 'won' }).success).toBe(false);
  });

  it('list pages map the plural key to records', () => {
    const pagination = { total_records: 1, current_page_number: 1, total_pages: 1, page_size: 30 };
    const page = listPageSchema('contacts').parse({ contacts: [contact], pagination });
    expect(page.records[0]?.email).toBe('ann@example.com');
    expect(page.pagination.total_pages).toBe(1);
    expect(listPageSchema('deals').safeParse({ contacts: [contact], pagination }).success).toBe(false);
  });
});
