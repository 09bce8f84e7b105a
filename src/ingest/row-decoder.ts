import {
  clearValueOf,
  OPERATION_TABLE,
  RecordIdSchema,
  type ListResource,
  type Operation,
  type OperationPayload,
} from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import type { ReferenceIndex, ReferenceKind } from '../references/index.js';
import { coerce } from './coerce.js';
import { didYouMean } from './did-you-mean.js';
import { ROW_FIELD, rowCodeOf, type FieldError, type ReferenceCode } from './field-error.js';
import { resolveMappedCell, resolveReferenceCell, type CellResolution, type ResolvedName } from './reference-cells.js';
import {
  fieldsOf,
  rulesFor,
  type ColumnRule,
  type EmptyCellPolicy,
  type CompareMode,
  type Mapping,
  type WritePolicy,
} from './mapping.js';
import type { SourceItem } from './source-types.js';

/**
 * A check of a source's header as a whole refusing it (no id column, no key column), in words
 * without the final period, and the columns it names as match keys: not unknown columns.
 */
export interface HeaderProblem {
  problem: string;
  keyColumns?: readonly string[];
}
import { validateRow } from './validate-row.js';

export interface RowDecoderOptions {
  op: Operation;
  /** Default: columns named like the operation's API fields map themselves. */
  mapping?: Mapping;
  /**
   * Skip (and list) columns that map to no field instead of refusing the file. Default false;
   * a mapping's `"unmapped": "ignore"` does the same.
   */
  ignoreUnknownColumns?: boolean;
  /** Columns the caller reads itself, e.g. reconcile's key column. Default none. */
  extraColumns?: readonly string[];
  /**
   * The workspace's references, for columns with `"by": "name"` (referenceLists says which lists
   * they need; useReferences can give them later, once read). Default none.
   */
  references?: ReferenceIndex;
}

/** One input row, ready for the producer: a payload to send XOR the errors to record. */
export interface IngestedRow {
  row: number;
  line: number;
  /** The source row's key (SourceRecord.ref), when its source names rows by a key column. */
  ref?: string;
  original: Record<string, string>;
  payload?: OperationPayload;
  code?: 'ROW_INVALID' | 'INPUT_PARSE' | 'INPUT_TOO_LARGE' | ReferenceCode;
  errors?: FieldError[];
  /** Cells sent as the ids their names stand for (plans and summaries show `"Negotiation" → stg_…`). */
  names?: ResolvedName[];
  /** Fields left out by `"onUnknown": "skip-field"`, with why. */
  skippedFields?: FieldError[];
}

/** What a row's values mapped to: API fields, cell errors, names resolved, fields skipped as unknown. */
export interface MappedValues {
  fields: Record<string, unknown>;
  errors: FieldError[];
  /** Present when a cell was sent for a name, lookup key or mapped value. */
  names?: ResolvedName[];
  /** Present when `"onUnknown": "skip-field"` left a field out. */
  skippedFields?: FieldError[];
}

/** What a row's values are mapped against beside the mapping. */
export interface MapContext {
  /**
   * The pipeline of the record the row updates (reconcile read it): a stage name two pipelines
   * share, in a row without a pipeline, is the stage of this one when it has it. Default none.
   */
  recordPipelineId?: string;
}

/** How a field is named to people: by its source column, with the API field when they differ. */
export function labelOf(rule: Pick<ColumnRule, 'column' | 'field'>): string {
  return rule.column === rule.field ? rule.field : `${rule.column} (${rule.field})`;
}

const DELIMITERS: Array<[string, string]> = [
  [';', ';'],
  ['\t', 'tab'],
  ['|', '|'],
];

/**
 * The one path from a source row to a payload or field errors, built once per (operation,
 * mapping) and shared by import, reconcile, nightly syncs and retries (docs/architecture.md,
 * "The path of a row"): the mapping is checked against the operation when it is built, the
 * file's columns against the mapping before a run exists, and every row the same way after.
 */
export class RowDecoder {
  readonly op: Operation;
  readonly rules: readonly ColumnRule[];
  /** What is done with a column that maps to no field. */
  readonly unknownColumns: 'error' | 'ignore';
  readonly #mapping: Mapping | undefined;
  readonly #known: Set<string>;
  /** Columns the mapping sets to null: skipped on purpose. */
  readonly #skipped: Set<string>;
  readonly #labels: Map<string, string>;
  #references: ReferenceIndex | undefined;

  constructor(options: RowDecoderOptions) {
    this.op = options.op;
    this.#mapping = options.mapping;
    this.rules = rulesFor(options.op, options.mapping);
    this.unknownColumns = options.ignoreUnknownColumns || options.mapping?.unmapped === 'ignore' ? 'ignore' : 'error';
    // The columns the rules read (a mapping's and those named like a field) and the ones it skips.
    const named = [...this.rules.map((r) => r.column), ...Object.keys(options.mapping?.columns ?? {})];
    this.#known = new Set([...named, ...(options.extraColumns ?? [])]);
    this.#skipped = new Set(
      Object.entries(options.mapping?.columns ?? {})
        .filter(([, target]) => target === null)
        .map(([column]) => column),
    );
    this.#labels = new Map(this.rules.map((r) => [r.field, labelOf(r)]));
    this.#references = options.references;
  }

  /**
   * The lists whose records must be read for this mapping's names (`"by": "name"` columns):
   * the operation's own list, whose records show the references its body takes. Empty: no
   * column names a reference by name.
   */
  referenceLists(): ListResource[] {
    const resource = OPERATION_TABLE[this.op].resource;
    if (resource === 'team-members' || !this.rules.some((r) => r.reference !== undefined)) return [];
    return [resource];
  }

  /** Gives the decoder the workspace's references, read once the source's columns passed (before any row). */
  useReferences(index: ReferenceIndex): void {
    this.#references = index;
  }

  get references(): ReferenceIndex | undefined {
    return this.#references;
  }

  /** The name people see for an API field: its source column, with the field when they differ. */
  label(field: string): string {
    return this.#labels.get(field) ?? field;
  }

  /** A field's write policies and how it compares with the CRM's (defaults for a field no rule targets). */
  policyOf(field: string): { write: WritePolicy; emptyCells: EmptyCellPolicy; compare: CompareMode } {
    const rule = this.rules.find((r) => r.field === field);
    return { write: rule?.write ?? 'always', emptyCells: rule?.emptyCells ?? 'skip', compare: rule?.compare ?? 'crm' };
  }

  /**
   * Why this mapping cannot be sent without the CRM's current values (a plain import, with no
   * reconcile to compare against): `"if-empty"` needs the CRM's value to know it is empty, and a
   * deal update's name, required by the API, cannot be left out for `"never"`. Empty when it can.
   * Creates are not concerned: a new record has no value to overwrite.
   */
  needsCrmValues(): string[] {
    if (OPERATION_TABLE[this.op].shape !== 'update') return [];
    const problems: string[] = [];
    for (const rule of this.rules) {
      if (rule.write === 'if-empty')
        problems.push(`${labelOf(rule)} has "write": "if-empty", which needs the CRM's current value`);
      else if (
        rule.write === 'never' &&
        (OPERATION_TABLE[this.op].updateRequired as readonly string[]).includes(rule.field)
      )
        problems.push(
          `${labelOf(rule)} has "write": "never", but the API requires a ${rule.field} on every ${recordWord(this.op)} update; only reconcile can keep the CRM's`,
        );
    }
    return problems;
  }

  /** Columns of a source that map to nothing and are skipped on purpose (null in the mapping, or unknown with "ignore"). */
  ignoredColumns(columns: readonly string[]): string[] {
    return columns.filter((c) => this.#skipped.has(c) || (!this.#known.has(c) && this.unknownColumns === 'ignore'));
  }

  /**
   * Checks a source's columns before anything is sent (INPUT_COLUMNS): a column the mapping
   * names but the file lacks (`complete`: the columns are a header, not JSON keys seen so far),
   * and columns that map to no field unless they are to be ignored. `header`: what a check of
   * the header as a whole refused (checkSource's), said in the same message.
   */
  checkColumns(columns: readonly string[], complete: boolean, header?: HeaderProblem): void {
    const problems = this.columnProblems(columns, complete, header?.keyColumns);
    if (header === undefined && problems.length === 0) return;
    // A header check's refusal (no id column, no key column) comes first, with every column
    // problem beside it: fixing one and only then hearing of the other costs a second run.
    const words =
      header === undefined
        ? problems
        : [header.problem, ...(problems.length > 0 ? [`Also, ${problems.join('; ')}`] : [])];
    throw new CrmSyncError('INPUT_COLUMNS', `${words.join('. ')}. Nothing was sent.`);
  }

  /**
   * What checkColumns refuses, in words (none: the columns fit). `alsoKnown`: columns another
   * check has already spoken for (a match key an id check names), not reported as unknown.
   */
  columnProblems(columns: readonly string[], complete: boolean, alsoKnown: readonly string[] = []): string[] {
    const problems: string[] = [];
    const present = new Set(columns);
    const missing =
      this.#mapping && complete
        ? this.rules.filter((r) => !r.implicit && !present.has(r.column)).map((r) => r.column)
        : [];
    for (const column of missing) {
      problems.push(
        `the mapping names column ${JSON.stringify(column)}, which the file does not have${didYouMean(column, columns)}`,
      );
    }
    if (this.unknownColumns === 'error') {
      const candidates = [
        ...missing,
        ...fieldsOf(this.op).filter((f) => !this.rules.some((r) => r.field === f && present.has(r.column))),
      ];
      const unknown = columns.filter((c) => !this.#known.has(c) && !alsoKnown.includes(c));
      if (unknown.length > 0) {
        const named = unknown.slice(0, 10).map((c) => `${JSON.stringify(c)}${didYouMean(c, candidates)}`);
        const more = unknown.length > 10 ? ` and ${unknown.length - 10} more` : '';
        problems.push(
          `column(s) ${named.join(', ')}${more} map to no field of ${this.op} (fields: ${fieldsOf(this.op).join(', ')}); ` +
            `rename them, map them in a mapping file (null skips one), or skip every such column with "unmapped": "ignore" in the mapping or --ignore-unknown-columns`,
        );
      }
      const glued =
        unknown.length === 1 && columns.length === 1
          ? DELIMITERS.find(([d]) => (unknown[0] as string).includes(d))
          : undefined;
      if (glued) problems.push(`the header looks ${glued[1]}-separated: pass --delimiter ${JSON.stringify(glued[0])}`);
    }
    return problems;
  }

  /**
   * A row's values → API fields, coerced per the mapping. Cells that fail are left out of
   * `fields` and reported in `errors` (by column label); nothing throws for a bad cell. Keys no
   * check has seen yet (a JSON row's new key) are refused here unless unknown columns are ignored.
   */
  mapValues(values: Record<string, unknown>, context: MapContext = {}): MappedValues {
    const fields: Record<string, unknown> = {};
    const errors: FieldError[] = [];
    const names: ResolvedName[] = [];
    const skippedFields: FieldError[] = [];
    if (this.unknownColumns === 'error') {
      for (const key of Object.keys(values)) {
        if (!this.#known.has(key)) {
          errors.push({
            field: key,
            message: `maps to no field of ${this.op}${didYouMean(key, fieldsOf(this.op))}; not sent (map it, or ignore it with --ignore-unknown-columns)`,
          });
        }
      }
    }
    const byName: Array<{ rule: ColumnRule & { reference: ReferenceKind }; value: unknown }> = [];
    const take = (rule: ColumnRule, resolved: CellResolution) => {
      if ('value' in resolved) {
        fields[rule.field] = resolved.value;
        names.push(...resolved.names);
      } else if (rule.onUnknown === 'skip-field') skippedFields.push(...resolved.errors);
      else errors.push(...resolved.errors);
    };
    for (const rule of this.rules) {
      if (!Object.hasOwn(values, rule.column)) continue;
      const result = coerce(values[rule.column], rule);
      if ('error' in result) errors.push({ field: labelOf(rule), message: result.error });
      else if ('value' in result) {
        if (rule.reference !== undefined)
          byName.push({ rule: { ...rule, reference: rule.reference }, value: result.value });
        else if (rule.lookup || rule.values) take(rule, resolveMappedCell(rule, labelOf(rule), result.value));
        else fields[rule.field] = result.value;
      } else if (rule.emptyCells === 'clear') {
        // An empty cell of a column that clears: the API's empty value (rulesFor checked it has one).
        const clear = clearValueOf(this.op, rule.field);
        if (clear !== undefined) fields[rule.field] = Array.isArray(clear) ? [...clear] : clear;
      }
    }
    if (byName.length > 0) {
      const index = this.#references;
      if (index === undefined)
        throw new CrmSyncError(
          'USAGE',
          `${this.op}: the mapping names references by name, but no reference index was read`,
        );
      // The pipeline first: a stage is looked for within the row's pipeline (by name or id).
      byName.sort((a, b) => Number(b.rule.reference === 'pipeline') - Number(a.rule.reference === 'pipeline'));
      for (const { rule, value } of byName) {
        const pipeline = typeof fields.pipeline_id === 'string' ? fields.pipeline_id.trim() : undefined;
        let resolved = resolveReferenceCell(rule, labelOf(rule), value, index, pipeline);
        // A stage name two pipelines share, in a row that names no pipeline: the record's own
        // pipeline decides when it holds the name; when it holds neither, it stays ambiguous.
        if (
          pipeline === undefined &&
          context.recordPipelineId !== undefined &&
          rule.reference === 'stage' &&
          'errors' in resolved &&
          resolved.errors.some((e) => e.code === 'REFERENCE_AMBIGUOUS')
        ) {
          const within = resolveReferenceCell(rule, labelOf(rule), value, index, context.recordPipelineId);
          if ('value' in within) resolved = within;
        }
        take(rule, resolved);
      }
    }
    // Built key by key: this runs for every row, and a spread of varying keys costs (RESULTS, issue 32).
    const mapped: MappedValues = { fields, errors };
    if (names.length > 0) mapped.names = names;
    if (skippedFields.length > 0) mapped.skippedFields = skippedFields;
    return mapped;
  }

  /**
   * A row's fields as sent without the CRM's values to compare with (a plain import, a retry):
   * an update leaves out every field that may not overwrite blindly (`"never"`, and
   * `"if-empty"`, which a plain import refuses up front). Creates keep every field.
   */
  withoutCrmValues(fields: Record<string, unknown>): Record<string, unknown> {
    if (OPERATION_TABLE[this.op].shape !== 'update') return fields;
    const kept: Record<string, unknown> = {};
    for (const [field, value] of Object.entries(fields))
      if (this.policyOf(field).write === 'always') kept[field] = value;
    return kept;
  }

  /**
   * API fields → the payload of `op` (default the decoder's; reconcile creates with
   * deal.create) or errors labelled by column. `earlier` are mapValues' errors: a cell that
   * failed coercion was left out, and "is required" (or "needs at least one field") on top of
   * its reason is noise.
   */
  validate(
    fields: Record<string, unknown>,
    earlier: readonly FieldError[] = [],
    op: Operation = this.op,
  ): { payload: OperationPayload; errors?: undefined } | { payload?: undefined; errors: FieldError[] } {
    const checked = validateRow(op, fields);
    if (checked.ok && earlier.length === 0) return { payload: checked.payload };
    const failed = new Set(earlier.map((e) => e.field));
    const errors = [...earlier];
    if (!checked.ok) {
      for (const e of checked.errors) {
        const field = this.label(e.field);
        // "Needs at least one field" is noise too when a cell was there but failed.
        if (!failed.has(field) && !(e.field === ROW_FIELD && earlier.length > 0))
          errors.push({ field, message: e.message });
      }
    }
    return { errors };
  }

  /**
   * A record id given in a row, checked before it is looked up (reconcile matches by id before
   * the row is validated): `..` is an invalid cell on every path, never "not found".
   */
  idErrors(id: string): FieldError[] {
    const checked = RecordIdSchema.safeParse(id);
    return checked.success ? [] : checked.error.issues.map((i) => ({ field: this.label('id'), message: i.message }));
  }

  /** One row's values → a payload, or field errors named by source column. */
  decodeValues(
    values: Record<string, unknown>,
  ): { payload: OperationPayload; errors?: undefined } | { payload?: undefined; errors: FieldError[] } {
    const mapped = this.mapValues(values);
    return this.validate(this.withoutCrmValues(mapped.fields), mapped.errors);
  }

  /** A source item → a row for the producer (a reader's problem stays a problem). */
  decode(item: SourceItem): IngestedRow {
    const { row, line, original } = item;
    const place = { row, line, ...(item.ref !== undefined ? { ref: item.ref } : {}) };
    if (item.kind === 'problem')
      return { ...place, original, code: item.code, errors: [{ field: ROW_FIELD, message: item.message }] };
    const inDoubt = exportedInDoubt(item.values);
    if (inDoubt) return { ...place, original, code: 'ROW_INVALID', errors: [{ field: ROW_FIELD, message: inDoubt }] };
    const mapped = this.mapValues(item.values);
    const { payload, errors } = this.validate(this.withoutCrmValues(mapped.fields), mapped.errors);
    const extra = {
      ...(mapped.names ? { names: mapped.names } : {}),
      ...(mapped.skippedFields ? { skippedFields: mapped.skippedFields } : {}),
    };
    return payload !== undefined
      ? { ...place, original, payload, ...extra }
      : { ...place, original, code: rowCodeOf(errors), errors, ...extra };
  }
}

/**
 * A line of a `runs export` whose row ended `uncertain` (a create that may have made its deal):
 * imported again, it could make a second deal, so it is refused with what to do instead.
 * (`runs retry --file` strips the export's columns first: there the row is retried, looking first.)
 */
function exportedInDoubt(values: Record<string, unknown>): string | undefined {
  if (values.crm_sync_result !== 'uncertain') return undefined;
  const run = typeof values.crm_sync_run_id === 'string' ? values.crm_sync_run_id : '<run>';
  const row = typeof values.crm_sync_row === 'string' ? values.crm_sync_row : '?';
  return (
    `not imported: row ${row} of run ${run} may already have made its deal (crm_sync_result uncertain), ` +
    `so importing it again could make a second one; "crm-sync runs retry ${run}" looks for its deal first`
  );
}

/** A record of the operation's resource in words (`deals` → `deal`). */
function recordWord(op: Operation): string {
  return OPERATION_TABLE[op].resource.replace(/s$/, '');
}
