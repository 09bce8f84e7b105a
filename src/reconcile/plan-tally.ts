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
}

/** Sums planned rows into a PlanSummary as they go by. */
export class PlanTally {
  #rows = 0;
  readonly #counts = emptyPlanCounts();
  #clearedRows = 0;
  readonly #changed: FieldTally = {};
  readonly #cleared: FieldTally = {};
  readonly #held: FieldTally = {};

  add(row: PlannedRow): void {
    this.#rows++;
    this.#counts[row.action]++;
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
    };
  }
}

/** The `n` fields with the most rows, most first: `[["phone_number", 60], …]`. */
export function topFields(tally: FieldTally, n = 5): Array<[string, number]> {
  return Object.entries(tally)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, n);
}
