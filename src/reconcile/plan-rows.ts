import { isCreatePayload, OPERATION_TABLE } from '../crm/index.js';
import {
  didYouMean,
  RowDecoder,
  ROW_FIELD,
  rowCodeOf,
  type MappedValues,
  type FieldError,
  type HeaderProblem,
  type Mapping,
  type SourceItem,
  type SourceRecord,
} from '../ingest/index.js';
import type { ProducedRow } from '../lifecycle/index.js';
import { placeOf } from '../runs/index.js';
import { diffFields, type FieldChange, type IndexedRecord } from './compare.js';
import type { RecordIndex } from './record-index.js';
import { RECONCILE_RESOURCE, writeOperation, type ReconcileOperation } from './resource-fields.js';
import { applyWritePolicies, type HeldField } from './write-policy.js';

/** The id a row matched by key is checked with (the CRM's own id is not input: #validateFor). */
const MATCHED_ID_STAND_IN = 'matched-by-key';

/** What reconcile decided for one row. */
export type PlanAction = 'update' | 'create' | 'skip' | 'not-found' | 'ambiguous' | 'invalid';
export const PLAN_ACTIONS: readonly PlanAction[] = ['update', 'create', 'skip', 'not-found', 'ambiguous', 'invalid'];

/** A row ready for the producer, plus the decision and its reasons (for the plan CSV). */
export type PlannedRow = ProducedRow & {
  action: PlanAction;
  /** The normalised match key value, when the row was matched by key. */
  key?: string;
  recordId?: string;
  /** Fields that differ from the CRM and will be sent (update) — empty for skip. */
  changes?: FieldChange[];
  /**
   * Fields that differ from the CRM but a mapping's write policy holds back (not sent), with
   * the CRM's value kept and why. Absent when none.
   */
  held?: HeldField[];
};

export interface PlanRowsOptions {
  op: ReconcileOperation;
  index: RecordIndex;
  /** Default: columns named like the API fields. */
  mapping?: Mapping;
  /**
   * Source column holding the match key. Default: the column the mapping maps to the key's
   * field, else the column named like the key (e.g. `email`, `unique_number`).
   */
  keyColumn?: string;
  /** Skip columns that map to no field instead of refusing them. Default false. */
  ignoreUnknownColumns?: boolean;
}

/** Where a planned row sits in the source (row, line, key) and its values as read. */
type RowBase = { row: number; line: number; ref?: string; original: Record<string, string> };

const SINGULAR = { deals: 'deal', leads: 'lead', contacts: 'contact' } as const;

/** The source column a row's match key is read from. */
export function keyColumnOf(matchKey: string, mapping?: Mapping, keyColumn?: string): string {
  if (keyColumn !== undefined) return keyColumn;
  for (const [column, target] of Object.entries(mapping?.columns ?? {})) {
    const field = typeof target === 'string' ? target : target?.field;
    if (field === matchKey) return column;
  }
  return matchKey;
}

/**
 * The one row decoder of a reconcile (the operation it writes with, the mapping, the key
 * column read on top): reconcile adds only matching and diffing to what import does.
 */
export function reconcileDecoder(
  options: Omit<PlanRowsOptions, 'index'> & { matchKey: string; refColumn?: string | undefined },
): RowDecoder {
  return new RowDecoder({
    op: writeOperation(options.op),
    ...(options.mapping ? { mapping: options.mapping } : {}),
    ...(options.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
    extraColumns: [
      keyColumnOf(options.matchKey, options.mapping, options.keyColumn),
      // A database source's key column names the row; the source reads it, no field takes it.
      ...(options.refColumn !== undefined ? [options.refColumn] : []),
    ],
  });
}

/**
 * Before a run exists: a file whose header has neither the id column nor the key column
 * cannot match a single row; say which column was looked for and what the file has (a
 * HeaderProblem: checkSource says the file's column problems in the same message).
 */
export function keyColumnProblem(
  decoder: RowDecoder,
  columns: readonly string[],
  options: { op: ReconcileOperation; matchKey: string; mapping?: Mapping | undefined; keyColumn?: string | undefined },
): HeaderProblem | undefined {
  const keyColumn = keyColumnOf(options.matchKey, options.mapping, options.keyColumn);
  const idColumn = decoder.rules.find((r) => r.field === 'id')?.column;
  if (columns.includes(keyColumn) || (idColumn !== undefined && columns.includes(idColumn))) return undefined;
  const resource = RECONCILE_RESOURCE[options.op];
  return {
    problem:
      `reconcile matches ${resource} by ${options.matchKey}, read from column ${JSON.stringify(keyColumn)}, which the file does not have` +
      `${didYouMean(keyColumn, columns)} (its columns: ${columns.map((c) => JSON.stringify(c)).join(', ')}); ` +
      `name the key column with --key-column, or map it to ${options.matchKey} in the mapping`,
  };
}

/**
 * Decides every row of a source against the index: resolve the id (by id, or by match key),
 * fill a deal update's required name from the CRM, validate, and diff. Rows equal to the CRM
 * come out `skipped`, unmatched and ambiguous ones `failed` (never sent), the rest as payloads.
 */
export async function* planRows(
  items: AsyncIterable<SourceItem>,
  options: PlanRowsOptions,
  decoder?: RowDecoder,
): AsyncGenerator<PlannedRow> {
  const planner = new RowPlanner(options, decoder);
  for await (const item of items) yield planner.plan(item);
}

/**
 * One planner per source. It remembers which keys an upsert creates and which CRM records rows
 * matched, so a second row for the same key or record is reported ambiguous instead of being
 * sent: two rows for one record would otherwise race in concurrent workers and the CRM would
 * end with whichever landed last.
 */
export class RowPlanner {
  readonly #options: PlanRowsOptions;
  readonly #keyColumn: string;
  readonly #decoder: RowDecoder;
  readonly #creates = new Map<string, number>();
  /** By the record's index slot: the row that matched it first (0: none yet); typed, not a Map of 100,000 ids. */
  #matched: Int32Array;

  /** `decoder`: the run's (reconcileDecoder); default one built from `options`. */
  constructor(options: PlanRowsOptions, decoder?: RowDecoder) {
    this.#options = options;
    this.#keyColumn = keyColumnOf(options.index.matchKey, options.mapping, options.keyColumn);
    this.#decoder = decoder ?? reconcileDecoder({ ...options, matchKey: options.index.matchKey });
    this.#matched = new Int32Array(options.index.size);
  }

  /** The row that matched the record first, if one did. */
  #matchedBy(id: string): number | undefined {
    const slot = this.#options.index.slotOf(id);
    const row = slot === undefined ? 0 : (this.#matched[slot] ?? 0);
    return row === 0 ? undefined : row;
  }

  #markMatched(id: string, row: number): void {
    const slot = this.#options.index.slotOf(id);
    if (slot === undefined) return;
    if (slot >= this.#matched.length) {
      const bigger = new Int32Array(Math.max(slot + 1, this.#matched.length * 2));
      bigger.set(this.#matched);
      this.#matched = bigger;
    }
    this.#matched[slot] = row;
  }

  plan(item: SourceItem): PlannedRow {
    const base = { ...placeOf(item), original: item.original };
    if (item.kind === 'problem')
      return { ...base, action: 'invalid', code: item.code, errors: [{ field: ROW_FIELD, message: item.message }] };
    let mapped = this.#decoder.mapValues(item.values);
    if (mapped.errors.some((e) => e.code === 'REFERENCE_AMBIGUOUS')) {
      // A shared stage name without a pipeline column: the matched deal's pipeline may decide it.
      const recordPipelineId = this.#matchedPipeline(item, mapped.fields);
      if (recordPipelineId !== undefined) mapped = this.#decoder.mapValues(item.values, { recordPipelineId });
    }
    const planned = this.#planRecord(item, base, mapped);
    // The names behind the ids the row sends (plans show `"Negotiation" → stg_…`), and what
    // "onUnknown": "skip-field" left out.
    if (planned.action === 'invalid') return planned;
    if (mapped.names) planned.names = mapped.names;
    if (mapped.skippedFields) {
      planned.skippedFields = mapped.skippedFields;
      const note = `left out: ${mapped.skippedFields.map((e) => `${e.field}: ${e.message}`).join('; ')} ("onUnknown": "skip-field")`;
      if (planned.outcome) planned.outcome = { ...planned.outcome, message: `${planned.outcome.message}; ${note}` };
    }
    return planned;
  }

  /** The pipeline of the one deal a row matches (by id or key), as the index read it; undefined for other rows. */
  #matchedPipeline(item: SourceRecord, fields: Readonly<Record<string, unknown>>): string | undefined {
    const { index } = this.#options;
    if (index.resource !== 'deals') return undefined;
    const id = typeof fields.id === 'string' ? fields.id.trim() : '';
    const found =
      id !== '' ? [index.byId(id)] : index.matchKey === 'id' ? [] : index.lookup(item.values[this.#keyColumn]);
    const pipeline = found.length === 1 ? found[0]?.values.pipeline_id : undefined;
    return pipeline !== undefined && pipeline !== '' ? pipeline : undefined;
  }

  #planRecord(item: SourceRecord, base: RowBase, mapped: MappedValues): PlannedRow {
    const { op, index } = this.#options;
    const resource = RECONCILE_RESOURCE[op];
    const noun = SINGULAR[resource];
    const wop = writeOperation(op);
    const { id: rawId, ...fields } = mapped.fields;
    const givenId = typeof rawId === 'string' ? rawId.trim() : '';
    if (mapped.errors.length > 0)
      return invalid(base, cellErrors(this.#decoder, op, fields, givenId, mapped.errors) ?? mapped.errors);
    const failed = (action: 'not-found' | 'ambiguous', code: string, message: string, key?: string): PlannedRow => ({
      ...base,
      action,
      ...(key !== undefined ? { key } : {}),
      outcome: { status: 'failed', code, message },
    });

    let key: string | undefined;
    let match;
    if (givenId !== '') {
      const idErrors = this.#decoder.idErrors(givenId);
      if (idErrors.length > 0) return invalid(base, idErrors);
      match = index.byId(givenId);
      if (!match) return failed('not-found', 'CRM_NOT_FOUND', `no ${noun} with id "${givenId}" in the CRM; not sent`);
    } else {
      const matchKey = index.matchKey;
      const raw = item.values[this.#keyColumn];
      const found = matchKey === 'id' ? [] : index.lookup(raw);
      key = matchKey === 'id' || raw === undefined || raw === null ? '' : String(raw).trim();
      if (key === '') return invalid(base, emptyKeyErrors(this.#decoder, matchKey, this.#keyColumn));
      if (found.length > 1) {
        const ids = found.map((r) => r.id).join(', ');
        return failed(
          'ambiguous',
          'RECONCILE_AMBIGUOUS',
          `${matchKey} "${key}" matches ${found.length} ${resource} (${ids}); not sent`,
          key,
        );
      }
      if (found.length === 0) {
        if (!OPERATION_TABLE[op].creates)
          return failed('not-found', 'CRM_NOT_FOUND', `no ${noun} with ${matchKey} "${key}"; not sent`, key);
        return this.#planCreate(base, fields, key);
      }
      match = found[0];
    }
    if (!match) return failed('not-found', 'CRM_NOT_FOUND', `no ${noun} matched; not sent`, key);
    const earlier = this.#matchedBy(match.id);
    if (earlier !== undefined) {
      return failed(
        'ambiguous',
        'RECONCILE_AMBIGUOUS',
        `${noun} ${match.id} is also matched by row ${earlier}; not sent`,
        key,
      );
    }

    const ignore = ['id'];
    // Fields the API requires on every update (a deal's name): a row without one keeps the CRM's.
    const required = OPERATION_TABLE[wop].updateRequired;
    for (const f of required)
      if (fields[f] === undefined || fields[f] === '') {
        fields[f] = crmValueOf(match, f);
        ignore.push(f);
      }
    const checked = this.#validateFor(fields, match.id);
    if (checked.errors) return invalid(base, checked.errors, key);
    // The mapping's write policies decide which differences may be written (write-policy.ts).
    const { send, changes, held } = applyWritePolicies(
      this.#decoder,
      fields,
      diffFields(resource, fields, match, ignore, (f) => this.#decoder.policyOf(f).compare),
    );
    // An update whose required field a policy held back still carries one: the CRM's, unchanged.
    for (const f of required) if (send[f] === undefined) send[f] = crmValueOf(match, f);
    const keyPart = key !== undefined ? { key } : {};
    const heldPart = held.length > 0 ? { held } : {};
    this.#markMatched(match.id, base.row);
    if (changes.length === 0) {
      const message =
        held.length > 0 ? `unchanged: held back by the mapping's write policy: ${heldWords(held)}` : 'unchanged';
      return {
        ...base,
        ...keyPart,
        action: 'skip',
        recordId: match.id,
        changes,
        ...heldPart,
        outcome: { status: 'skipped', message, recordId: match.id },
      };
    }
    // Fields a policy keeps out are not sent even when equal (the CRM may change before the row
    // lands), and a name a policy held is the CRM's, not the row's: the row's own payload goes
    // only when every field of it is sent as the row has it.
    const whole = Object.keys(fields).every((f) => Object.hasOwn(send, f) && send[f] === fields[f]);
    const payload = whole ? checked : this.#validateFor(send, match.id);
    if (payload.errors) return invalid(base, payload.errors, key);
    // What the record held when read: the worker sends the row only while the record still holds
    // it (the drift check, as for an applied plan's row), and its result keeps it for `runs undo`.
    const expect = Object.fromEntries(
      changes.filter((c) => c.current !== undefined).map((c) => [c.field, c.current!] as const),
    );
    const place = index.placeOf(match.id);
    return {
      ...base,
      ...keyPart,
      action: 'update',
      recordId: match.id,
      changes,
      ...heldPart,
      payload: payload.payload,
      expect,
      ...(place !== undefined ? { listPlace: place } : {}),
    };
  }

  /**
   * The row's fields checked as the update of the matched record. Input rules apply to input:
   * the id is the CRM's (any string, spec §2.5; its path segment is escaped when sent), so the
   * check runs on a stand-in and the payload carries the CRM's id as it came. A row's own id
   * cell was checked before it was looked up (idErrors).
   */
  #validateFor(fields: Record<string, unknown>, id: string): ReturnType<RowDecoder['validate']> {
    const checked = this.#decoder.validate({ ...fields, id: MATCHED_ID_STAND_IN });
    if (checked.payload && 'id' in checked.payload) checked.payload.id = id;
    return checked;
  }

  #planCreate(base: RowBase, fields: Record<string, unknown>, key: string): PlannedRow {
    const earlier = this.#creates.get(key);
    if (earlier !== undefined) {
      return {
        ...base,
        action: 'ambiguous',
        key,
        outcome: {
          status: 'failed',
          code: 'RECONCILE_AMBIGUOUS',
          message: `${this.#options.index.matchKey} "${key}" is also in row ${earlier}, which creates it; not sent`,
        },
      };
    }
    const checked = this.#decoder.validate(fields, [], 'deal.create');
    if (checked.errors) return invalid(base, checked.errors, key);
    this.#creates.set(key, base.row);
    // The match key rides along: a concurrent upsert may create this key before this row does.
    const payload = isCreatePayload(checked.payload)
      ? { ...checked.payload, match: `${this.#options.index.matchKey}=${key}` }
      : checked.payload;
    return { ...base, action: 'create', key, payload };
  }
}

/** `phone_number ("write": "never"), name ("write": "if-empty", …)` */
export function heldWords(held: readonly HeldField[]): string {
  return held.map((h) => `${h.field} (${h.reason})`).join(', ');
}

/** A row with neither an id nor a match key cannot be matched: said by the column it was read from. */
function emptyKeyErrors(decoder: RowDecoder, matchKey: string, keyColumn: string): FieldError[] {
  const idLabel = decoder.label('id');
  if (matchKey === 'id') return [{ field: idLabel, message: 'is empty: every row needs one' }];
  return [
    {
      field: keyColumn,
      message: `is empty, and so is ${idLabel}: a row needs an id or a ${matchKey} to match (read from column ${JSON.stringify(keyColumn)})`,
    },
  ];
}

/**
 * A row with bad cells is not matched, but reports what import reports for it: the bad cells
 * and every other field's problems. The id and a deal update's name come from the CRM here,
 * so their absence is not the row's fault and stand-ins take their place for the check.
 * Without cell errors it is the check of the row as the update of whichever record it matches.
 */
function cellErrors(
  decoder: RowDecoder,
  op: ReconcileOperation,
  fields: Record<string, unknown>,
  givenId: string,
  cells: FieldError[],
): FieldError[] | undefined {
  const standIns: Record<string, unknown> = { id: givenId !== '' ? givenId : MATCHED_ID_STAND_IN };
  for (const f of OPERATION_TABLE[writeOperation(op)].updateRequired)
    if (fields[f] === undefined) standIns[f] = 'from the CRM';
  const errors = decoder.validate({ ...fields, ...standIns }, cells).errors;
  return errors ?? (cells.length > 0 ? cells : undefined);
}

/** What the file alone tells of a row (checkRows): invalid with these errors, or valid. */
export interface RowCheck {
  code?: string;
  errors?: FieldError[];
}

/**
 * A row checked without the CRM, by the planner's own rules (the same decoder, id check, key
 * check and payload validation a matched row gets): what can make a row invalid before any
 * record is read. Whether it then matches one record, none or several only the plan can say.
 * A deal upsert's row is checked as the update it is when its key matches.
 */
export function checkRow(
  item: SourceItem,
  decoder: RowDecoder,
  options: { op: ReconcileOperation; matchKey: string; keyColumn: string },
): RowCheck {
  if (item.kind === 'problem') return { code: item.code, errors: [{ field: ROW_FIELD, message: item.message }] };
  const mapped = decoder.mapValues(item.values);
  const { id: rawId, ...fields } = mapped.fields;
  const givenId = typeof rawId === 'string' ? rawId.trim() : '';
  const invalidWith = (errors: FieldError[] | undefined): RowCheck =>
    errors === undefined || errors.length === 0 ? {} : { code: rowCodeOf(errors), errors };
  if (mapped.errors.length > 0) return invalidWith(cellErrors(decoder, options.op, fields, givenId, mapped.errors));
  if (givenId !== '') {
    const idErrors = decoder.idErrors(givenId);
    if (idErrors.length > 0) return invalidWith(idErrors);
  } else {
    const raw = item.values[options.keyColumn];
    const key = options.matchKey === 'id' || raw === undefined || raw === null ? '' : String(raw).trim();
    if (key === '') return invalidWith(emptyKeyErrors(decoder, options.matchKey, options.keyColumn));
  }
  return invalidWith(cellErrors(decoder, options.op, fields, givenId, []));
}

function invalid(base: RowBase, errors: FieldError[], key?: string): PlannedRow {
  return { ...base, action: 'invalid', ...(key !== undefined ? { key } : {}), code: rowCodeOf(errors), errors };
}

/**
 * A record's value of a field an update must send, as the CRM holds it. The index keeps values
 * canonical, and the name as it is too: the one field the API requires on updates (a deal's).
 */
function crmValueOf(match: IndexedRecord, field: string): string | undefined {
  return field === 'name' ? match.name : undefined;
}
