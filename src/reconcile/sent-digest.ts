import { createHash } from 'node:crypto';
import type { ListResource } from '../crm/index.js';
import { canonicalFromRow, type IndexedRecord } from './compare.js';
import { COMPARABLE_FIELDS } from './resource-fields.js';

/*
 * What a succeeded row sent, kept compactly with its result so `verify` compares the CRM with
 * what was really sent last (a `runs retry --file` correction, a row from a database) instead of
 * re-reading a source that may say something else (docs/architecture.md, "Verify").
 *
 * Form: `<mask>.<h1><h2>…` — `mask` (base 36) has bit i set when the i-th comparable field of
 * the resource was sent; then 3 base64url characters (18 bits of sha1) of each sent field's
 * canonical value, in field order. A deal update of name and value is `3.` plus 6 characters:
 * about 16 bytes a row in Redis. A field changed since has a 1 in 262,144 chance of hashing the
 * same, which verify accepts. Fields the CRM never reports (`position`) are not kept: they cannot
 * be checked.
 */

const HASH_CHARS = 3;

function fieldHash(canonical: string): string {
  return createHash('sha1').update(canonical).digest('base64url').slice(0, HASH_CHARS);
}

/** The digest of the fields a row sent, or undefined when none of them can be compared. */
export function sentDigest(resource: ListResource, fields: Record<string, unknown>): string | undefined {
  let mask = 0;
  let hashes = '';
  COMPARABLE_FIELDS[resource].forEach((field, i) => {
    const value = fields[field];
    if (value === undefined) return;
    mask |= 1 << i;
    hashes += fieldHash(canonicalFromRow(field, value));
  });
  return mask === 0 ? undefined : `${mask.toString(36)}.${hashes}`;
}

export interface DigestCheck {
  /** Fields the row sent. */
  sent: string[];
  /** Sent fields whose value in the CRM is not what was sent. */
  drifted: string[];
}

/** Compares a record with a stored digest; undefined when the digest cannot be read. */
export function checkDigest(resource: ListResource, digest: string, record: IndexedRecord): DigestCheck | undefined {
  const dot = digest.indexOf('.');
  const mask = parseInt(digest.slice(0, dot), 36);
  if (dot < 1 || !Number.isSafeInteger(mask)) return undefined;
  const fields = COMPARABLE_FIELDS[resource];
  const out: DigestCheck = { sent: [], drifted: [] };
  let at = dot + 1;
  for (let i = 0; i < fields.length; i++) {
    if ((mask & (1 << i)) === 0) continue;
    const field = fields[i]!;
    const hash = digest.slice(at, at + HASH_CHARS);
    at += HASH_CHARS;
    if (hash.length !== HASH_CHARS) return undefined;
    out.sent.push(field);
    if (fieldHash(record.values[field] ?? '') !== hash) out.drifted.push(field);
  }
  return at === digest.length ? out : undefined;
}

/** Whether a field's canonical value is the one a digest says was sent (to show a source's value as "sent"). */
export function digestHolds(resource: ListResource, digest: string, field: string, canonical: string): boolean {
  const dot = digest.indexOf('.');
  const mask = parseInt(digest.slice(0, dot), 36);
  const fields: readonly string[] = COMPARABLE_FIELDS[resource];
  const i = fields.indexOf(field);
  if (dot < 1 || i < 0 || (mask & (1 << i)) === 0) return false;
  let at = dot + 1;
  for (let j = 0; j < i; j++) if ((mask & (1 << j)) !== 0) at += HASH_CHARS;
  return digest.slice(at, at + HASH_CHARS) === fieldHash(canonical);
}
