/** Spec-shaped answer records (spec §2) shared by the client's schema and HTTP tests. */
export const ts = '2025-01-02T03:04:05.000Z';

export const leadRecord = {
  id: 'l1',
  name: 'Lead',
  status: 'open',
  unique_number: 'L-1',
  email: 'a@b.co',
  phone_number: '',
  contact: { id: null, name: 'x' },
  company: { id: null, name: null },
  owner: null,
  tags: [],
  created_at: ts,
  updated_at: ts,
};
