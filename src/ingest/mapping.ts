import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import {
  clearValueOf,
  CLEAR_VALUES,
  OPERATION_TABLE,
  OPERATIONS,
  rowFieldSchemas,
  type Operation,
} from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import { normaliseReferenceName, REFERENCE_FIELDS, type ReferenceKind } from '../references/index.js';
import { loadLookupTable, type LookupTable } from './lookup-table.js';

export const COLUMN_TYPES = ['string', 'number', 'integer', 'list', 'boolean-string'] as const;
export const ColumnTypeSchema = z.enum(COLUMN_TYPES, `must be one of ${COLUMN_TYPES.join(', ')}`);
export type ColumnType = z.infer<typeof ColumnTypeSchema>;

/**
 * When a field may overwrite the CRM's value, where rows are compared with the CRM (reconcile,
 * `import --reconcile`, nightly syncs, plans): `always`; `if-empty`, only where the CRM's value
 * is empty; `never`, used to match or create, never to overwrite.
 */
export const WRITE_POLICIES = ['always', 'if-empty', 'never'] as const;
export const WritePolicySchema = z.enum(WRITE_POLICIES, `must be one of ${WRITE_POLICIES.join(', ')}`);
export type WritePolicy = z.infer<typeof WritePolicySchema>;

/** What an empty source cell means: `skip`, leave the CRM's value alone; `clear`, empty it. */
export const EMPTY_CELL_POLICIES = ['skip', 'clear'] as const;
export const EmptyCellPolicySchema = z.enum(EMPTY_CELL_POLICIES, `must be one of ${EMPTY_CELL_POLICIES.join(', ')}`);
export type EmptyCellPolicy = z.infer<typeof EmptyCellPolicySchema>;

/**
 * How a row's value is compared with the CRM's when deciding whether the row changes the field
 * (reconcile, plans, syncs, the drift check): `crm`, as the CRM tells values apart — an email
 * differing only in case is the same address, so unchanged and not sent; `exact`, every
 * character counts, for a column meant to fix an address's case. Only fields the CRM compares
 * loosely (email) compare differently under the two.
 */
export const COMPARE_MODES = ['crm', 'exact'] as const;
export const CompareModeSchema = z.enum(COMPARE_MODES, `must be one of ${COMPARE_MODES.join(', ')}`);
export type CompareMode = z.infer<typeof CompareModeSchema>;

/**
 * What a column whose name, lookup key or value the CRM's references do not know does: `error`,
 * the row is invalid (REFERENCE_UNKNOWN); `skip-field`, the row is sent without that field.
 */
/** What splits a list cell's items (`VIP; Hot`) when the column names no `separator`. */
export const LIST_SEPARATOR = ';';

export const ON_UNKNOWN = ['error', 'skip-field'] as const;
export const OnUnknownSchema = z.enum(ON_UNKNOWN, `must be one of ${ON_UNKNOWN.join(', ')}`);
export type OnUnknown = z.infer<typeof OnUnknownSchema>;

/** A column's `lookup`: the cell is a `key` of the file (CSV or JSON; relative to the mapping file), the field gets its `value`. */
export const LookupSchema = z.strictObject(
  {
    file: z.string('must be the path of a CSV or JSON file').min(1, 'must not be empty'),
    key: z.string('must be the name of the file column the cells hold').min(1, 'must not be empty'),
    value: z.string('must be the name of the file column holding the ids').min(1, 'must not be empty'),
  },
  {
    error: (iss) =>
      iss.code === 'unrecognized_keys'
        ? `unknown setting(s) ${iss.keys.join(', ')}: use file, key, value`
        : iss.code === 'invalid_type'
          ? 'must be an object like {"file": "owners.csv", "key": "email", "value": "id"}'
          : undefined,
  },
);

const ColumnRuleSchema = z.strictObject(
  {
    field: z.string('must be the name of an API field').min(1, 'must not be empty'),
    /** Default: inferred from the target field (see inferType). */
    type: ColumnTypeSchema.optional(),
    /** list only. Default LIST_SEPARATOR (';'). */
    separator: z.string('must be text').min(1, 'must not be empty').optional(),
    /** Default true. */
    trim: z.boolean('must be true or false').optional(),
    /** Default "always". */
    write: WritePolicySchema.optional(),
    /** Default "skip". "clear" only for fields the API can hold empty (CLEAR_VALUES). */
    emptyCells: EmptyCellPolicySchema.optional(),
    /** Default "crm" (an email's case does not count); "exact" (COMPARE_MODES). */
    compare: CompareModeSchema.optional(),
    /** "name": the cells name a pipeline, stage, tag or company; resolved to its id from the CRM's records. */
    by: z.literal('name', 'must be "name"').optional(),
    /** The cells are keys of a file the user gives; the field gets the id the file names. */
    lookup: LookupSchema.optional(),
    /** Fixed values by what the file says: {"Closed Won": "won"}; compared trimmed, case ignored. */
    values: z
      .record(z.string(), z.string('must be the API value the text stands for'), 'must be an object of "text": "value"')
      .optional(),
    /** Default "error" (ON_UNKNOWN). */
    onUnknown: OnUnknownSchema.optional(),
  },
  {
    error: (iss) =>
      iss.code === 'unrecognized_keys'
        ? `unknown setting(s) ${iss.keys.join(', ')}: use field, type, separator, trim, write, emptyCells, compare, by, lookup, values, onUnknown`
        : undefined,
  },
);

/**
 * A mapping file: source column → API field, or a rule with a coercion, or null to ignore the
 * column explicitly (useful with `unmapped: "error"`).
 */
export const MappingSchema = z
  .strictObject(
    {
      columns: z.record(
        z.string(),
        z.union([z.string().min(1), z.null(), ColumnRuleSchema], {
          error: 'must be a field name, null, or an object like {"field": "value", "type": "number"}',
        }),
        'must be an object of "source column": "api_field"',
      ),
      /**
       * What to do with source columns (JSON keys) the mapping does not name. Default "error":
       * the file is refused before anything is sent; "ignore" skips them (the run lists them).
       */
      unmapped: z.enum(['ignore', 'error'], 'must be "ignore" or "error"').default('error'),
    },
    {
      error: (iss) =>
        iss.code === 'unrecognized_keys'
          ? `unknown setting(s) ${iss.keys.join(', ')}: use columns and unmapped`
          : iss.code === 'invalid_type'
            ? 'must be an object like {"columns": {"Source column": "api_field"}}'
            : undefined,
    },
  )
  .superRefine((mapping, ctx) => {
    const byField = new Map<string, string>();
    for (const [column, target] of Object.entries(mapping.columns)) {
      const field = typeof target === 'string' ? target : target?.field;
      if (field === undefined) continue;
      const other = byField.get(field);
      if (other !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['columns', column],
          message: `maps to "${field}", which column "${other}" already maps to`,
        });
      }
      byField.set(field, column);
    }
  });
export type Mapping = z.infer<typeof MappingSchema>;

/** A mapping entry with every default applied. */
export interface ColumnRule {
  column: string;
  field: string;
  type: ColumnType;
  separator: string;
  trim: boolean;
  /** The mapping named the type: JSON numbers and booleans may then become text. */
  typed: boolean;
  /**
   * The column is named like its field and the mapping does not name it: it maps itself, and a
   * file without it is fine (only columns a mapping names must be in the header).
   */
  implicit: boolean;
  /** When the field may overwrite the CRM's value. */
  write: WritePolicy;
  /** What an empty cell does. */
  emptyCells: EmptyCellPolicy;
  /** How the row's value is compared with the CRM's. */
  compare: CompareMode;
  /** `"by": "name"`: the kind of reference the cells name (resolved with the workspace's ReferenceIndex). */
  reference?: ReferenceKind;
  /** `lookup`: the file read, cell → id. */
  lookup?: LookupTable;
  /** `values`: normalised text → API value, and the texts as the mapping writes them (for messages). */
  values?: { map: ReadonlyMap<string, string>; texts: readonly string[] };
  /** What a cell its reference, lookup or value map does not know does. */
  onUnknown: OnUnknown;
}

/** Every operation's row fields: the operation table's row shape around its body schema. */
const ROW_FIELDS = Object.fromEntries(
  OPERATIONS.map((op) => [op, Object.keys(rowFieldSchemas(op))]),
) as unknown as Readonly<Record<Operation, readonly string[]>>;

/** The row-level fields an operation takes (the names a mapping may target). */
export function fieldsOf(op: Operation): readonly string[] {
  return ROW_FIELDS[op];
}

const FIELD_TYPES: Readonly<Record<string, ColumnType>> = {
  value: 'number',
  position: 'integer',
  tag_ids: 'list',
  send_invitation_email: 'boolean-string',
};

/** The coercion a field gets when the mapping does not say. */
export function inferType(field: string): ColumnType {
  return FIELD_TYPES[field] ?? 'string';
}

function jsonPath(path: readonly PropertyKey[]): string {
  return (
    '$' +
    path
      .map((p) =>
        typeof p === 'number'
          ? `[${p}]`
          : /^[A-Za-z_]\w*$/.test(String(p))
            ? `.${String(p)}`
            : `[${JSON.stringify(String(p))}]`,
      )
      .join('')
  );
}

/** Validates a parsed mapping document. `source` names it in errors (a file name, "run x"). */
export function parseMapping(raw: unknown, source: string): Mapping {
  const result = MappingSchema.safeParse(raw);
  if (result.success) return result.data;
  const issues = result.error.issues.flatMap((issue) => {
    // A union only says "none of the shapes fit"; for an object entry the rule's own reason helps more.
    const value = issue.path.reduce<unknown>((v, p) => (v as Record<PropertyKey, unknown> | undefined)?.[p], raw);
    if (issue.code !== 'invalid_union' || value === null || typeof value !== 'object' || Array.isArray(value))
      return [issue];
    const inner = ColumnRuleSchema.safeParse(value);
    return inner.success ? [issue] : inner.error.issues.map((i) => ({ ...i, path: [...issue.path, ...i.path] }));
  });
  const problems = issues.slice(0, 5).map((i) => `at ${jsonPath(i.path)}: ${i.message}`);
  throw new CrmSyncError('MAPPING_INVALID', `${source}: ${problems.join('; ')}`);
}

/** Reads and validates a mapping file, keeping the raw document (a run stores it for retries). */
export function readMappingFile(path: string): { mapping: Mapping; raw: unknown } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason =
      code === 'ENOENT' ? 'the file does not exist' : code === 'EISDIR' ? 'it is a directory' : String(code ?? err);
    throw new CrmSyncError('MAPPING_INVALID', `cannot read mapping file ${path}: ${reason}`, { cause: err });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new CrmSyncError(
      'MAPPING_INVALID',
      `${path}: not valid JSON (${err instanceof Error ? err.message : String(err)})`,
    );
  }
  const mapping = parseMapping(raw, path);
  anchorLookups(mapping, raw, dirname(path));
  // A lookup file that cannot be used is refused with the mapping, before any source is opened.
  for (const target of Object.values(mapping.columns))
    if (target !== null && typeof target === 'object' && target.lookup) loadLookupTable(target.lookup);
  return { mapping, raw };
}

/**
 * A lookup file is named relative to its mapping file; the run keeps the mapping (retries,
 * resumes read it again from anywhere), so its path is made absolute in both documents.
 */
function anchorLookups(mapping: Mapping, raw: unknown, dir: string): void {
  const rawColumns = (raw as { columns?: Record<string, unknown> }).columns ?? {};
  for (const [column, target] of Object.entries(mapping.columns)) {
    if (target === null || typeof target !== 'object' || !target.lookup || isAbsolute(target.lookup.file)) continue;
    const file = resolve(dir, target.lookup.file);
    target.lookup.file = file;
    const rawLookup = (rawColumns[column] as { lookup?: { file?: string } } | undefined)?.lookup;
    if (rawLookup) rawLookup.file = file;
  }
}

export function loadMapping(path: string): Mapping {
  return readMappingFile(path).mapping;
}

const DEFAULT_RULES = Object.fromEntries(
  Object.entries(ROW_FIELDS).map(([op, fields]) => [
    op,
    fields.map((field): ColumnRule => ({
      column: field,
      field,
      type: inferType(field),
      separator: LIST_SEPARATOR,
      trim: true,
      typed: false,
      implicit: true,
      write: 'always',
      emptyCells: 'skip',
      compare: 'crm',
      onUnknown: 'error',
    })),
  ]),
) as Record<Operation, ColumnRule[]>;

/**
 * A column's write policies that cannot mean anything for `op`: a record id is how a row finds
 * its record and is never written, and only some fields can be emptied through the API.
 */
function policyProblems(
  op: Operation,
  column: string,
  rule: {
    field: string;
    write?: WritePolicy | undefined;
    emptyCells?: EmptyCellPolicy | undefined;
    by?: 'name' | undefined;
    lookup?: unknown;
    values?: unknown;
    onUnknown?: OnUnknown | undefined;
  },
): string[] {
  const problems: string[] = [];
  const setsPolicy = (rule.write !== undefined && rule.write !== 'always') || rule.emptyCells === 'clear';
  if (rule.field === 'id' && setsPolicy)
    problems.push(
      `column "${column}" maps to id, which finds the record and is never written: "write" and "emptyCells" do not apply`,
    );
  else if (rule.emptyCells === 'clear' && clearValueOf(op, rule.field) === undefined) {
    const clearable = Object.keys(CLEAR_VALUES).filter((f) => clearValueOf(op, f) !== undefined);
    problems.push(
      `column "${column}" has "emptyCells": "clear", but the API cannot empty ${rule.field} (` +
        (clearable.length > 0
          ? `of ${op}'s fields only ${clearable.join(', ')} can be cleared`
          : `${op} has no field that can be cleared`) +
        '); use "skip" (an empty cell leaves the value alone)',
    );
  }
  if (rule.by === 'name' && REFERENCE_FIELDS[rule.field] === undefined)
    problems.push(
      `column "${column}" has "by": "name", but ${rule.field} is not a reference names resolve to (${Object.keys(REFERENCE_FIELDS).join(', ')}); for owner_id and other ids use "lookup" with a file`,
    );
  const ways = [
    rule.by !== undefined && '"by"',
    rule.lookup !== undefined && '"lookup"',
    rule.values !== undefined && '"values"',
  ].filter(Boolean);
  if (ways.length > 1)
    problems.push(`column "${column}" has ${ways.join(' and ')}: use one way to turn a cell into a value`);
  if (rule.onUnknown !== undefined && ways.length === 0)
    problems.push(`column "${column}" has "onUnknown", which applies with "by", "lookup" or "values" only`);
  if (OPERATION_TABLE[op].shape === 'invite' && setsPolicy)
    problems.push(`column "${column}": write policies apply to record updates, not to ${op}`);
  return problems;
}

/** A mapping entry's ways from a cell to a value (by name, a lookup file, a value map), resolved. */
function cellWays(rule: {
  field: string;
  by?: 'name' | undefined;
  lookup?: z.infer<typeof LookupSchema> | undefined;
  values?: Record<string, string> | undefined;
  onUnknown?: OnUnknown | undefined;
}): Pick<ColumnRule, 'reference' | 'lookup' | 'values' | 'onUnknown'> {
  const reference = rule.by === 'name' ? REFERENCE_FIELDS[rule.field] : undefined;
  return {
    onUnknown: rule.onUnknown ?? 'error',
    ...(reference !== undefined ? { reference } : {}),
    ...(rule.lookup ? { lookup: loadLookupTable(rule.lookup) } : {}),
    ...(rule.values
      ? {
          values: {
            map: new Map(Object.entries(rule.values).map(([text, value]) => [normaliseReferenceName(text), value])),
            texts: Object.keys(rule.values),
          },
        }
      : {}),
  };
}

const ruleCache = new WeakMap<Mapping, Map<Operation, ColumnRule[]>>();

/**
 * The mapping's rules for `op`, checked against the operation's fields (MAPPING_INVALID when a
 * column targets a field the operation does not have). Every field no mapping entry targets maps
 * from the column of the same name (all of them without a mapping); those rules are `implicit`.
 */
export function rulesFor(op: Operation, mapping?: Mapping): readonly ColumnRule[] {
  const fields = fieldsOf(op);
  if (mapping === undefined) return DEFAULT_RULES[op];
  const cached = ruleCache.get(mapping)?.get(op);
  if (cached !== undefined) return cached;
  const rules: ColumnRule[] = [];
  const wrong: string[] = [];
  const policies: string[] = [];
  for (const [column, target] of Object.entries(mapping.columns)) {
    if (target === null) continue;
    const rule = typeof target === 'string' ? { field: target } : target;
    if (!fields.includes(rule.field)) wrong.push(`column "${column}" maps to "${rule.field}"`);
    else policies.push(...policyProblems(op, column, rule));
    rules.push({
      column,
      field: rule.field,
      type: rule.type ?? inferType(rule.field),
      separator: rule.separator ?? LIST_SEPARATOR,
      trim: rule.trim ?? true,
      typed: typeof target !== 'string' && target.type !== undefined,
      implicit: false,
      write: rule.write ?? 'always',
      emptyCells: rule.emptyCells ?? 'skip',
      compare: rule.compare ?? 'crm',
      ...cellWays(rule),
    });
  }
  // A mapping file names the odd columns; the rest, named like their field, still map
  // themselves (docs/imports.md's promise). Not a field another column already maps to, and not a
  // column the mapping itself names (mapped elsewhere, or null to skip it).
  for (const rule of DEFAULT_RULES[op]) {
    if (Object.hasOwn(mapping.columns, rule.column) || rules.some((r) => r.field === rule.field)) continue;
    rules.push(rule);
  }
  if (wrong.length > 0) {
    throw new CrmSyncError(
      'MAPPING_INVALID',
      `mapping: ${wrong.join('; ')}, which ${op} does not have; valid fields are ${fields.join(', ')}`,
    );
  }
  if (policies.length > 0) throw new CrmSyncError('MAPPING_INVALID', `mapping: ${policies.join('; ')}`);
  const perOp = ruleCache.get(mapping) ?? new Map<Operation, ColumnRule[]>();
  perOp.set(op, rules);
  ruleCache.set(mapping, perOp);
  return rules;
}
