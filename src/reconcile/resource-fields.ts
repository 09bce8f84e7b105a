import {
  OPERATION_TABLE,
  RECONCILE_OPERATIONS,
  RESOURCE_TABLE,
  sendsAs,
  type Contact,
  type Deal,
  type Lead,
  type ListResource,
  type Operation,
  type ReconcileOperation,
} from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';

// What a reconciled run may be, and what each pages and matches by: the operation table's.
export { RECONCILE_OPERATIONS, type ReconcileOperation };

/** The resource each reconciled operation pages. */
export const RECONCILE_RESOURCE = Object.fromEntries(
  RECONCILE_OPERATIONS.map((op) => [op, OPERATION_TABLE[op].resource]),
) as unknown as Readonly<Record<ReconcileOperation, ListResource>>;

/** Row fields that can be compared with a record, per resource, in the order the index packs them. */
export const COMPARABLE_FIELDS = {
  deals: RESOURCE_TABLE.deals.comparable,
  leads: RESOURCE_TABLE.leads.comparable,
  contacts: RESOURCE_TABLE.contacts.comparable,
} as const satisfies Record<ListResource, readonly string[]>;

/** Keys a record can be matched by, besides `id`. */
export const MATCH_KEYS = {
  deals: RESOURCE_TABLE.deals.matchKeys,
  leads: RESOURCE_TABLE.leads.matchKeys,
  contacts: RESOURCE_TABLE.contacts.matchKeys,
} as const satisfies Record<ListResource, readonly string[]>;

export const DEFAULT_MATCH_KEY: Record<ListResource, string> = {
  deals: RESOURCE_TABLE.deals.defaultMatchKey,
  leads: RESOURCE_TABLE.leads.defaultMatchKey,
  contacts: RESOURCE_TABLE.contacts.defaultMatchKey,
};

export type AnyRecord = Deal | Lead | Contact;

/** The operation a row of a reconciled run is validated and sent as (an upsert row updates). */
export function writeOperation(op: ReconcileOperation): Exclude<Operation, 'team.invite' | 'deal.create'> {
  return sendsAs(op) as Exclude<Operation, 'team.invite' | 'deal.create'>;
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
