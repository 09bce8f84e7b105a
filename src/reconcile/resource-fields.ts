import type { Contact, Deal, Lead, ListResource, Operation } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';

/** What a reconciled run may be: an update operation, or a deal sync that creates what is missing. */
export type ReconcileOperation = 'deal.update' | 'lead.update' | 'contact.update' | 'deal.upsert';
export const RECONCILE_OPERATIONS: readonly ReconcileOperation[] = [
  'deal.update',
  'lead.update',
  'contact.update',
  'deal.upsert',
];

/** The resource each reconciled operation pages. */
export const RECONCILE_RESOURCE: Record<ReconcileOperation, ListResource> = {
  'deal.update': 'deals',
  'deal.upsert': 'deals',
  'lead.update': 'leads',
  'contact.update': 'contacts',
};

/**
 * Row fields that can be compared with a record, per resource, in the order the index packs
 * them. `position` is write-only (responses never carry it) and so is never indexed.
 */
export const COMPARABLE_FIELDS = {
  deals: ['name', 'value', 'status', 'owner_id', 'stage_id', 'pipeline_id', 'tag_ids'],
  leads: ['name', 'status', 'owner_id', 'tag_ids'],
  contacts: ['name', 'email', 'phone_number', 'company_id', 'owner_id', 'tag_ids'],
} as const satisfies Record<ListResource, readonly string[]>;

/** Keys a record can be matched by, besides `id`. */
export const MATCH_KEYS = {
  deals: ['unique_number', 'name'],
  leads: ['email', 'unique_number', 'name'],
  contacts: ['email', 'name', 'phone_number'],
} as const satisfies Record<ListResource, readonly string[]>;

export const DEFAULT_MATCH_KEY: Record<ListResource, string> = {
  deals: 'unique_number',
  leads: 'email',
  contacts: 'email',
};

export type AnyRecord = Deal | Lead | Contact;

/** The operation a row of a reconciled run is validated and sent as (an upsert row updates). */
export function writeOperation(op: ReconcileOperation): Exclude<Operation, 'team.invite' | 'deal.create'> {
  return op === 'deal.upsert' ? 'deal.update' : op;
}

export function isReconcileOperation(op: string): op is ReconcileOperation {
  return (RECONCILE_OPERATIONS as readonly string[]).includes(op);
}

/** Checks a match key against the resource; USAGE names the keys that work. */
export function checkMatchKey(resource: ListResource, key: string): string {
  const allowed: readonly string[] = MATCH_KEYS[resource];
  if (key === 'id' || allowed.includes(key)) return key;
  throw new CrmSyncError('USAGE', `cannot match ${resource} by "${key}": use one of id, ${allowed.join(', ')}`);
}

/** Match keys compare trimmed; emails also ignore case (mailboxes do, in practice). */
export function normaliseKey(key: string, value: unknown): string {
  if (value === undefined || value === null) return '';
  const s = (
    typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : ''
  ).trim();
  return key === 'email' || key === 'unique_number' ? s.toLowerCase() : s;
}

/** A record's value for a match key (email of a lead comes from its contact, as the API renders it). */
export function recordKey(record: AnyRecord, key: string): string {
  if (key === 'id') return record.id;
  return normaliseKey(key, (record as Record<string, unknown>)[key]);
}
