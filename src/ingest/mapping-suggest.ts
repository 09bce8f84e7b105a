import { nearest } from './did-you-mean.js';
import { fieldsOf, LIST_SEPARATOR, type Mapping } from './mapping.js';
import type { Operation } from '../crm/index.js';
import { readsAsName, REFERENCE_FIELDS, type ReferenceIndex } from '../references/index.js';

/** Where a column's suggested field comes from, strongest first. */
export type SuggestionSource = 'remembered' | 'same name' | 'did you mean' | 'none';

export interface ColumnSuggestion {
  column: string;
  /** The API field, or null: skip the column. */
  field: string | null;
  from: SuggestionSource;
  /** The remembered mapping's rule for the column (type, write policy …), when it had one. */
  rule?: Exclude<Mapping['columns'][string], string | null>;
  /** `name`: the column holds names of its reference field's kind (`"by": "name"`), not ids. */
  by?: 'name';
}

export interface SuggestOptions {
  /** The mapping last used for the same header set (its choices come first). */
  remembered?: Mapping | undefined;
  /** Each column's first values: a reference field's column holding names is offered by name. */
  samples?: Readonly<Record<string, readonly string[]>>;
  /** The workspace's known references, to tell their ids from names (readsAsName). Default none. */
  references?: ReferenceIndex | undefined;
}

/**
 * A field for each column of a file (the dashboard's mapping table): the mapping last used for
 * the same header set (`remembered`) first, then a column named like a field, then the
 * did-you-mean the CLI gives for an unknown column (`E-mail` → email, `Phone` → phone_number).
 * A field goes to one column only (a mapping refuses two), the first that claims it; the rest skip.
 * A reference field's column is offered by name when one of its first values reads as a name, not
 * an id (`Stage` of "Negotiation" → stage_id by name), unless the remembered mapping chose.
 */
export function suggestMapping(
  op: Operation,
  columns: readonly string[],
  options: SuggestOptions = {},
): ColumnSuggestion[] {
  const { remembered } = options;
  const fields = fieldsOf(op);
  const taken = new Set<string>();
  const out: ColumnSuggestion[] = columns.map((column) => ({ column, field: null, from: 'none' }));
  const claim = (s: ColumnSuggestion, field: string | undefined, from: SuggestionSource): boolean => {
    if (field === undefined || !fields.includes(field) || taken.has(field)) return false;
    taken.add(field);
    s.field = field;
    s.from = from;
    return true;
  };
  if (remembered !== undefined) {
    for (const s of out) {
      if (!Object.hasOwn(remembered.columns, s.column)) continue;
      const target = remembered.columns[s.column];
      if (target === null || target === undefined) s.from = 'remembered';
      else if (typeof target === 'string') claim(s, target, 'remembered');
      else if (claim(s, target.field, 'remembered')) s.rule = target;
    }
  }
  for (const s of out) if (s.from === 'none') claim(s, fields.includes(s.column) ? s.column : undefined, 'same name');
  for (const s of out) if (s.from === 'none') claim(s, nearest(s.column, fields), 'did you mean');
  for (const s of out) {
    const kind = s.field !== null ? REFERENCE_FIELDS[s.field] : undefined;
    if (kind === undefined) continue;
    if (s.from === 'remembered') {
      if (s.rule?.by !== undefined) s.by = s.rule.by;
      continue;
    }
    const separator = s.rule?.separator ?? LIST_SEPARATOR;
    const cells = (options.samples?.[s.column] ?? []).flatMap((v) => (kind === 'tag' ? v.split(separator) : [v]));
    if (cells.some((cell) => readsAsName(kind, cell, options.references))) s.by = 'name';
  }
  return out;
}
