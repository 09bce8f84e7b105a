import { tally } from '../counts/index.js';
import type { PlanCounts } from './plan-csv.js';
import { emptyPlanCounts } from './plan-csv.js';
import type { PlannedRow } from './plan-rows.js';

/** Rows per field: how many rows a plan changes, clears or holds back for each field. */
export type FieldTally = Record<string, number>;

/**
 * What a plan would do, summed for a guard or a person: counts by action, and per field the
 * rows that change it, the rows that empty it (a change to an empty value over a value that
 * is not empty: a blank cell with `"emptyCells": "clear"`), and the rows a write policy holds.
 */
export interface PlanSummary {
  rows: number;
  counts: PlanCounts;
  /** Rows that would write: updates and creates. */
  changedRows: number;
  /** Rows that would empty at least one field. */
  clearedRows: number;
  /** Field → rows whose update changes it (clears included). */
  changed: FieldTally;
  /** Field → rows whose update empties it. */
  cleared: FieldTally;
  /** Field → rows where a write policy held a change back. */
  held: FieldTally;
  /** Names the rows sent as ids, by column and name, most rows first (at most MAX_NAME_GROUPS). */
  names: NameGroup[];
  /**
   * Rows invalid because a name, lookup key or value resolved to no id or to several, grouped
   * by column and value (`"Negotiaton"` — 212 rows, did you mean "Negotiation"?), most rows first.
   */
  unresolved: UnresolvedGroup[];
}

/** One name as the rows that sent it: `Stage (stage_id) "Negotiation" → stg_…`, in so many rows (its first spelling). */
export interface NameGroup {
  column: string;
  text: string;
  id: string;
  rows: number;
}

/** One value no id (or several) stood for, as the rows that gave it. */
export interface UnresolvedGroup {
  code: string;
  column: string;
  value: string;
  suggestion?: string;
  /** The first such row's message (the same for every row of the group). */
  message: string;
  rows: number;
}

/** Distinct groups kept: a file of free text in a name column must not grow a summary without bound. */
const MAX_NAME_GROUPS = 200;

/** `"Negotiaton" — 212 rows, did you mean "Negotiation"?` (column first when asked). */
export function unresolvedWords(g: UnresolvedGroup, withColumn = true): string {
  const rows = `${g.rows} row${g.rows === 1 ? '' : 's'}`;
  const what = g.code === 'REFERENCE_AMBIGUOUS' ? ', names several' : '';
  const near = g.suggestion !== undefined ? `, did you mean ${JSON.stringify(g.suggestion)}?` : '';
  return `${withColumn ? `${g.column}: ` : ''}${JSON.stringify(g.value)} — ${rows}${what}${near}`;
}

/** Sums planned rows into a PlanSummary as they go by. */
export class PlanTally {
  #rows = 0;
  readonly #counts = emptyPlanCounts();
  #clearedRows = 0;
  readonly #changed: FieldTally = {};
  readonly #cleared: FieldTally = {};
  readonly #held: FieldTally = {};
  readonly #names = new Map<string, NameGroup>();
  readonly #unresolved = new Map<string, UnresolvedGroup>();

  add(row: PlannedRow): void {
    this.#rows++;
    this.#counts[row.action]++;
    for (const n of row.names ?? []) {
      // By column and id: ` NEGOTIATION ` and `Negotiation` are one name, shown as first written.
      const key = `${n.label}\u0000${n.id}`;
      const group = this.#names.get(key);
      if (group) group.rows++;
      else if (this.#names.size < MAX_NAME_GROUPS)
        this.#names.set(key, { column: n.label, text: n.text, id: n.id, rows: 1 });
    }
    for (const e of row.errors ?? []) {
      if (e.code === undefined || e.value === undefined) continue;
      const key = `${e.code}\u0000${e.field}\u0000${e.value}`;
      const group = this.#unresolved.get(key);
      if (group) group.rows++;
      else if (this.#unresolved.size < MAX_NAME_GROUPS)
        this.#unresolved.set(key, {
          code: e.code,
          column: e.field,
          value: e.value,
          ...(e.suggestion !== undefined ? { suggestion: e.suggestion } : {}),
          message: e.message,
          rows: 1,
        });
    }
    let clears = false;
    for (const c of row.changes ?? []) {
      tally(this.#changed, c.field);
      if (c.wanted === '' && c.current !== '') {
        tally(this.#cleared, c.field);
        clears = true;
      }
    }
    if (clears) this.#clearedRows++;
    for (const h of row.held ?? []) tally(this.#held, h.field);
  }

  summary(): PlanSummary {
    return {
      rows: this.#rows,
      counts: { ...this.#counts },
      changedRows: this.#counts.update + this.#counts.create,
      clearedRows: this.#clearedRows,
      changed: { ...this.#changed },
      cleared: { ...this.#cleared },
      held: { ...this.#held },
      names: [...this.#names.values()].sort((a, b) => b.rows - a.rows),
      unresolved: [...this.#unresolved.values()].sort((a, b) => b.rows - a.rows),
    };
  }
}

/** The `n` fields with the most rows, most first: `[["phone_number", 60], …]`. */
export function topFields(tally: FieldTally, n = 5): Array<[string, number]> {
  return Object.entries(tally)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, n);
}
