import { tagIdOf, type ListResource } from '../crm/index.js';
import type { CompareMode } from '../ingest/index.js';
import { COMPARABLE_FIELDS, type AnyRecord } from './resource-fields.js';

/*
 * Row fields and record fields meet in one canonical text form per field, so "unchanged" is a
 * string comparison: tag ids as a sorted set, numbers as numbers, strings trimmed, and empty,
 * null and missing all the same. Responses name references differently from requests
 * (`owner` vs `owner_id`, `stage.id` vs `stage_id`); the mapping lives here only.
 */

const UNIT = '\u001f';
/** What separates a packed record's parts (packRecord): the id, then each comparable field. */
export const PACK_UNIT = UNIT;
const LIST = '\u001e';

function text(value: unknown): string {
  if (value === undefined || value === null) return '';
  const s =
    typeof value === 'string'
      ? value
      : typeof value === 'number' || typeof value === 'boolean'
        ? String(value)
        : JSON.stringify(value);
  // The packed index uses two control characters as separators; they never occur in real data.
  return s.trim().replaceAll(UNIT, ' ').replaceAll(LIST, ' ');
}

function numberText(value: unknown): string {
  if (value === undefined || value === null || value === '') return '';
  const n = typeof value === 'number' ? value : Number(text(value));
  return Number.isFinite(n) ? String(n) : text(value);
}

function tagSet(ids: readonly unknown[]): string {
  const set = new Set<string>();
  for (const id of ids) {
    const t = text(id);
    if (t !== '') set.add(t);
  }
  return [...set].sort().join(LIST);
}

const refId = (ref: unknown): string =>
  ref !== null && typeof ref === 'object' && 'id' in ref ? text((ref as { id: unknown }).id) : '';

/** Names as a CRM may store them: Unicode-normalised, whitespace collapsed, case folded. */
export function normaliseName(name: string): string {
  return name.normalize('NFC').trim().replace(/\s+/g, ' ').toLowerCase();
}

/** Fields whose case the CRM ignores: one address, however it is spelled. */
const CASELESS_FIELDS: ReadonlySet<string> = new Set(['email']);

/**
 * The one decision of "unchanged": whether two canonical values of `field` are the same value,
 * compared as `mode` says (a mapping column's `compare`: `crm`, as the CRM tells values apart,
 * so an email's case does not count; `exact`, every character). Every before/after equality
 * (diffing a row, the drift check, re-planning, undo) asks here.
 */
export function sameCanonical(field: string, a: string, b: string, mode: CompareMode = 'crm'): boolean {
  if (a === b) return true;
  return mode === 'crm' && CASELESS_FIELDS.has(field) && a.toLowerCase() === b.toLowerCase();
}

/** The canonical value of one comparable field as a row would send it. */
export function canonicalFromRow(field: string, value: unknown): string {
  if (field === 'tag_ids')
    return Array.isArray(value) ? tagSet(value) : tagSet(value === undefined || value === null ? [] : [value]);
  if (field === 'value') return numberText(value);
  return text(value);
}

/** The canonical value of one comparable field as the CRM reports it. */
export function canonicalFromRecord(field: string, record: AnyRecord): string {
  const r = record as Record<string, unknown>;
  switch (field) {
    case 'tag_ids':
      return tagSet(Array.isArray(r.tags) ? r.tags.map((t) => tagIdOf(t) ?? '') : []);
    case 'value':
      return numberText(r.value);
    case 'owner_id':
      return text(r.owner);
    case 'stage_id':
      return refId(r.stage);
    case 'pipeline_id':
      return refId(r.pipeline);
    case 'company_id':
      return refId(r.company);
    default:
      return text(r[field]);
  }
}

/** A record reduced to what diffing needs: id and the comparable fields, packed in one string. */
export function packRecord(resource: ListResource, record: AnyRecord): string {
  return [record.id, ...COMPARABLE_FIELDS[resource].map((f) => canonicalFromRecord(f, record))].join(UNIT);
}

/** The key a record reports a comparable field under (`owner` for `owner_id`, `tags` for `tag_ids`). */
const RECORD_KEY: Readonly<Record<string, string>> = {
  tag_ids: 'tags',
  owner_id: 'owner',
  stage_id: 'stage',
  pipeline_id: 'pipeline',
  company_id: 'company',
};

/** Whether the record (a write's answer) reports the field at all: one it leaves out says nothing of its value. */
export function reportsField(field: string, record: AnyRecord): boolean {
  return (record as Record<string, unknown>)[RECORD_KEY[field] ?? field] !== undefined;
}

/** A packed record, readable. */
export interface IndexedRecord {
  id: string;
  name: string;
  /** Canonical values by comparable field. */
  values: Record<string, string>;
}

export function unpackRecord(resource: ListResource, packed: string): IndexedRecord {
  const parts = packed.split(UNIT);
  const values: Record<string, string> = {};
  COMPARABLE_FIELDS[resource].forEach((f, i) => {
    values[f] = parts[i + 1] ?? '';
  });
  return { id: parts[0] ?? '', name: values.name ?? '', values };
}

export interface FieldChange {
  field: string;
  /** Canonical current value ('' = empty); undefined when the CRM does not report the field. */
  current?: string;
  wanted: string;
}

/**
 * The fields of `fields` (API fields a row would send) that differ from the record. A field
 * the record cannot show (e.g. `position`) always counts as a change: it cannot be proven equal.
 * `ignore` lists fields not to compare (e.g. `id`, or a name that came from the index);
 * `modeOf` says how each field compares (sameCanonical; default as the CRM does).
 */
export function diffFields(
  resource: ListResource,
  fields: Record<string, unknown>,
  record: IndexedRecord,
  ignore: readonly string[] = ['id'],
  modeOf: (field: string) => CompareMode = () => 'crm',
): FieldChange[] {
  const comparable: readonly string[] = COMPARABLE_FIELDS[resource];
  const changes: FieldChange[] = [];
  for (const [field, value] of Object.entries(fields)) {
    if (value === undefined || ignore.includes(field)) continue;
    const wanted = canonicalFromRow(field, value);
    if (!comparable.includes(field)) {
      changes.push({ field, wanted });
      continue;
    }
    const current = record.values[field] ?? '';
    if (!sameCanonical(field, current, wanted, modeOf(field))) changes.push({ field, current, wanted });
  }
  return changes;
}

/** Human text of canonical values (tag sets with `;`). */
export function showCanonical(value: string | undefined): string {
  return value === undefined ? '(not reported)' : value.replaceAll(LIST, ';');
}

/**
 * A canonical value back as a row sends it (what `runs undo` writes back): tag sets as id
 * lists, `value` as a number, the rest as text. Undefined for an empty value no request can
 * write (an empty name, owner, …: the API refuses empty text), except the fields that take one
 * (`phone_number`, `tag_ids`).
 */
export function rowValueFromCanonical(field: string, value: string): unknown {
  if (field === 'tag_ids') return value === '' ? [] : value.split(LIST);
  if (value === '') return field === 'phone_number' ? '' : undefined;
  if (field === 'value') return Number(value);
  return value;
}
