import { CrmSyncError } from '../errors/index.js';

/** Letters, digits and `_`, with one optional `schema.` part (the config schema checks the same). */
export const HISTORY_TABLE_NAME = /^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$/i;

/** The history table's name as SQL: each part quoted, so `order` or `select` is a table like any other. */
export interface PgTableName {
  /** `"schema"."table"` or `"table"`. */
  sql: string;
  /** An index of the table, `"<table>_<suffix>"` (it lives in the table's schema). */
  index(suffix: string): string;
  /** The index qualified like the table, as to_regclass reads it. */
  qualifiedIndex(suffix: string): string;
}

/**
 * Quotes the history table's name. Each part is lowercased first: unquoted, PostgreSQL folded
 * `Crm_History` to `crm_history`, so a table an earlier version made under a mixed-case name is
 * the one found again.
 */
export function pgTableName(name: string): PgTableName {
  if (!HISTORY_TABLE_NAME.test(name))
    throw new CrmSyncError(
      'CONFIG_INVALID',
      `history table name not allowed: ${name} (letters, digits and _, with one optional schema. part)`,
    );
  const parts = name.toLowerCase().split('.');
  const quote = (p: string) => `"${p}"`;
  const table = parts[parts.length - 1]!;
  const schema = parts.length > 1 ? `${quote(parts[0]!)}.` : '';
  return {
    sql: `${schema}${quote(table)}`,
    index: (suffix) => quote(`${table}_${suffix}`),
    qualifiedIndex: (suffix) => `${schema}${quote(`${table}_${suffix}`)}`,
  };
}
