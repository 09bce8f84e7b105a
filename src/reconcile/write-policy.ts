import type { RowDecoder, WritePolicy } from '../ingest/index.js';
import type { FieldChange } from './compare.js';

/**
 * A field a row would change that a mapping's write policy held back: not sent, so the CRM
 * keeps `current`. A plan shows these per row (`held_back` in the plan CSV).
 */
export interface HeldField {
  field: string;
  /** The policy that held it: `never`, or `if-empty` over a value that is not empty. */
  policy: Exclude<WritePolicy, 'always'>;
  /** Canonical CRM value kept; undefined when the CRM does not report the field. */
  current?: string;
  /** Canonical value the row has. */
  wanted: string;
  /** Why, in words. */
  reason: string;
}

/** What a matched row may write once the mapping's write policies are applied. */
export interface PolicyOutcome {
  /** The row's fields the update may send (unchanged ones included, as before policies). */
  send: Record<string, unknown>;
  /** The changes left to make. */
  changes: FieldChange[];
  /** The changes the policies held back. */
  held: HeldField[];
}

/**
 * Applies the decoder's write policies to a matched row: `changes` are the row's differences
 * from the record (diffFields). A `"never"` field is not sent at all; an `"if-empty"` field is
 * sent only as a change over an empty CRM value (a field the CRM does not report cannot be
 * shown empty, so it is held). `"always"` fields are sent as before.
 */
export function applyWritePolicies(
  decoder: Pick<RowDecoder, 'policyOf'>,
  fields: Record<string, unknown>,
  changes: readonly FieldChange[],
): PolicyOutcome {
  const held: HeldField[] = [];
  const kept: FieldChange[] = [];
  const changed = new Map(changes.map((c) => [c.field, c]));
  const send: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(fields)) {
    const { write } = decoder.policyOf(field);
    const change = changed.get(field);
    if (write === 'always') {
      send[field] = value;
      continue;
    }
    if (write === 'if-empty' && change !== undefined && change.current === '') {
      send[field] = value;
      continue;
    }
    // Not sent; held when it differs (an equal value changes nothing either way).
    if (change === undefined) continue;
    held.push({
      field,
      policy: write,
      ...(change.current !== undefined ? { current: change.current } : {}),
      wanted: change.wanted,
      reason:
        write === 'never'
          ? '"write": "never"'
          : change.current === undefined
            ? '"write": "if-empty", and the CRM does not report this field'
            : '"write": "if-empty", and the CRM already has a value',
    });
  }
  const heldFields = new Set(held.map((h) => h.field));
  for (const c of changes) if (!heldFields.has(c.field) && Object.hasOwn(send, c.field)) kept.push(c);
  return { send, changes: kept, held };
}
