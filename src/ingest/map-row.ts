import type { Operation } from '../crm/index.js';
import type { FieldError } from '../runs/index.js';
import { coerce } from './coerce.js';
import { rulesFor, type ColumnRule, type Mapping } from './mapping.js';

/** How a field is named to people: by its source column, with the API field when they differ. */
export function labelOf(rule: Pick<ColumnRule, 'column' | 'field'>): string {
  return rule.column === rule.field ? rule.field : `${rule.column} (${rule.field})`;
}

/**
 * A source row → API fields of `op`, coerced per the mapping (or by name without one). Cells
 * that fail coercion are left out of `fields` and reported in `errors`; nothing throws for a
 * bad cell. MAPPING_INVALID is thrown only for a mapping that does not fit the operation.
 */
export function mapRow(op: Operation, values: Record<string, unknown>, mapping?: Mapping): { fields: Record<string, unknown>; errors: FieldError[] } {
  const fields: Record<string, unknown> = {};
  const errors: FieldError[] = [];
  for (const rule of rulesFor(op, mapping)) {
    if (!Object.hasOwn(values, rule.column)) continue;
    const result = coerce(values[rule.column], rule);
    if ('error' in result) errors.push({ field: labelOf(rule), message: result.error });
    else if ('value' in result) fields[rule.field] = result.value;
  }
  return { fields, errors };
}
