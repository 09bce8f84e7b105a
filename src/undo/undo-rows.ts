import type { FieldChanges, RowResult } from '../runs/index.js';

/** What a run wrote to one record, over all its rows: per field, the value before its first write and after its last. */
export interface RecordWrites {
  recordId: string;
  /** The run's rows that wrote the record, in write order. */
  rows: number[];
  /** Source line of the last of them (what the undo row shows). */
  line?: number;
  changes: FieldChanges;
}

/** A deal the run created: the API has no delete, so an undo lists it for removal by hand. */
export interface CreatedDeal {
  row: number;
  dealId: string;
  /** The fields its create sent (canonical). */
  fields: Record<string, string>;
}

/**
 * A run's succeeded writes, folded per record (a record written by several rows of the run is
 * put back to its value before the first, and counts as unchanged only while it holds the
 * last's). `creates`: whether a row that knows no before-value at all made its record (a
 * deal.create run, or an upsert's create).
 */
export async function foldWrites(
  results: AsyncIterable<RowResult>,
  creates: boolean,
): Promise<{ records: RecordWrites[]; created: CreatedDeal[] }> {
  const byRecord = new Map<string, Array<{ row: number; line?: number; at: number; changes: FieldChanges }>>();
  const created: CreatedDeal[] = [];
  for await (const r of results) {
    if (r.status !== 'succeeded' || r.changes === undefined || r.recordId === undefined) continue;
    const values = Object.values(r.changes);
    if (creates && values.length > 0 && values.every(([before]) => before === null)) {
      created.push({
        row: r.row,
        dealId: r.recordId,
        fields: Object.fromEntries(Object.entries(r.changes).map(([f, [, after]]) => [f, after])),
      });
      continue;
    }
    const list = byRecord.get(r.recordId) ?? [];
    list.push({
      row: r.row,
      ...(r.line !== undefined ? { line: r.line } : {}),
      at: Date.parse(r.at),
      changes: r.changes,
    });
    byRecord.set(r.recordId, list);
  }
  const records: RecordWrites[] = [];
  for (const [recordId, writes] of byRecord) {
    writes.sort((a, b) => a.at - b.at || a.row - b.row);
    const changes: FieldChanges = {};
    for (const w of writes)
      for (const [field, [before, after]] of Object.entries(w.changes)) {
        const first = changes[field];
        changes[field] = [first ? first[0] : before, after];
      }
    const last = writes[writes.length - 1]!;
    records.push({
      recordId,
      rows: writes.map((w) => w.row),
      ...(last.line !== undefined ? { line: last.line } : {}),
      changes,
    });
  }
  records.sort((a, b) => Math.min(...a.rows) - Math.min(...b.rows));
  created.sort((a, b) => a.row - b.row);
  return { records, created };
}
