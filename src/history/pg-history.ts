import { createRequire } from 'node:module';
import type pg from 'pg';
import { DEFAULTS } from '../config/index.js';
import { errorMessage } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import { changeValue, type RowResult, type RunNames } from '../runs/index.js';
import type { HistoryMarks } from './history-marks.js';
import { pgTableName, type PgTableName } from './pg-table.js';
import { namedChange, type HistoryEntry } from './record-history.js';

/** Where the fleet's history goes: a PostgreSQL URL and the (optionally schema-qualified) table. */
export interface PgHistoryOptions {
  url: string;
  /** Default DEFAULTS.history.table. Letters, digits and `_`, with one optional `schema.` part; quoted. */
  table?: string;
  logger?: Logger;
  /** Rows per INSERT, and the longest a change waits to be written (ms). Default DEFAULTS.history. */
  batchRows?: number;
  flushMs?: number;
  /** Changes held while the database does not answer; beyond, the oldest results' are let go (a catch-up writes them). */
  maxPending?: number;
  /** Where written results are counted (a worker's): without, nothing is counted and only a catch-up marks runs. */
  marks?: HistoryMarks;
}

/** What the history writer did: for logs, `check`, tests. */
export interface PgHistoryStats {
  written: number;
  pending: number;
  /** Failed batch writes (each retried later). */
  failures: number;
  /** Changes let go from memory because too many waited: still in the runs' results, for the catch-up. */
  dropped: number;
  lastError?: string;
}

/** One field change, one table row; unique by (workspace, run, row, field). */
export interface HistoryChange {
  workspace: string;
  recordId: string;
  field: string;
  before: string | null;
  after: string;
  runId: string;
  row: number;
  at: Date;
}

interface Pending extends HistoryChange {
  /** The last change of its result: once written, the result counts as written (HistoryMarks `live`). */
  last: boolean;
}

/** The field changes a stored result holds (succeeded rows with a record and before/after). */
export function changesOf(workspace: string, runId: string, r: RowResult): HistoryChange[] {
  if (r.status !== 'succeeded' || r.changes === undefined || r.recordId === undefined) return [];
  const recordId = r.recordId;
  return Object.entries(r.changes).map(([field, [before, after]]) => ({
    workspace,
    recordId,
    field,
    before,
    after,
    runId,
    row: r.row,
    at: new Date(r.at),
  }));
}

/**
 * History that outlives Redis (issue 34, item 4): every applied field change, one table row each
 * (workspace, record, field, before, after, run, row, time), written in batches. The table is
 * created on first use. A write never blocks or fails a row: `add` only buffers; a failed batch
 * stays buffered and is tried again on the next flush (logged once per failure streak).
 *
 * The buffer is a shortcut, not the record: the runs' results in Redis hold every change, a
 * result counts as written (HistoryMarks) only after its INSERT, and a run that owes history —
 * a writer killed, a database down at close, changes let go past `maxPending` — is written again
 * from its stored results by the catch-up (history-catch-up.ts). Inserts skip a change already
 * in the table (a unique index on workspace, run, row, field), so nothing is written twice.
 */
export class PgHistory {
  readonly #pool: pg.Pool;
  readonly #table: PgTableName;
  readonly #logger: Logger;
  readonly #batchRows: number;
  readonly #maxPending: number;
  readonly #marks: HistoryMarks | undefined;
  #pending: Pending[] = [];
  /** Succeeded results with nothing to write (no changes), by workspace and run: counted at the next flush. */
  #empty = new Map<string, { workspace: string; runId: string; n: number }>();
  #ready: Promise<void> | undefined;
  #timer: NodeJS.Timeout;
  #flushing: Promise<void> | undefined;
  #failing = false;
  readonly stats: PgHistoryStats = { written: 0, pending: 0, failures: 0, dropped: 0 };

  constructor(options: PgHistoryOptions) {
    this.#table = pgTableName(options.table ?? DEFAULTS.history.table);
    this.#logger = options.logger ?? silentLogger;
    this.#batchRows = options.batchRows ?? DEFAULTS.history.batchRows;
    this.#maxPending = options.maxPending ?? DEFAULTS.history.maxPending;
    this.#marks = options.marks;
    // Required here, not imported: a process without a history database never loads pg (0.06–0.1 s
    // of CPU on every CLI start); pg is CommonJS and this constructor is synchronous.
    const driver = createRequire(import.meta.url)('pg') as typeof pg;
    this.#pool = new driver.Pool({
      connectionString: options.url,
      max: 2,
      connectionTimeoutMillis: DEFAULTS.history.connectTimeoutMs,
    });
    // A dropped idle connection is the pool's business; the next write reconnects.
    this.#pool.on('error', () => undefined);
    this.#timer = setInterval(() => void this.flush(), options.flushMs ?? DEFAULTS.history.flushMs);
    this.#timer.unref();
  }

  /** Buffers the field changes of stored results (succeeded rows with before/after). Never throws. */
  add(workspace: string, runId: string, results: readonly RowResult[]): void {
    for (const r of results) {
      if (r.status !== 'succeeded') continue;
      const changes = changesOf(workspace, runId, r);
      if (changes.length === 0) {
        const key = `${workspace}\n${runId}`;
        const e = this.#empty.get(key) ?? { workspace, runId, n: 0 };
        e.n++;
        this.#empty.set(key, e);
        continue;
      }
      changes.forEach((c, i) => this.#pending.push({ ...c, last: i === changes.length - 1 }));
    }
    let over = this.#pending.length - this.#maxPending;
    if (over > 0) {
      // Whole results only: a result counts as written by its last change, so none may go
      // without the changes before it.
      while (over < this.#pending.length && !this.#pending[over - 1]!.last) over++;
      this.#pending.splice(0, over);
      this.stats.dropped += over;
    }
    this.stats.pending = this.#pending.length;
    if (this.#pending.length >= this.#batchRows) void this.flush();
  }

  /** Writes what is buffered (one flush at a time). Never throws: a failure is counted and kept for the next. */
  flush(): Promise<void> {
    this.#flushing ??= this.#drain().finally(() => (this.#flushing = undefined));
    return this.#flushing;
  }

  async #drain(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending.slice(0, this.#batchRows);
      try {
        await this.write(batch);
      } catch (err) {
        this.stats.failures++;
        this.stats.lastError = errorMessage(err);
        if (!this.#failing)
          this.#logger.warn(
            { err: this.stats.lastError, pending: this.#pending.length },
            'history database did not take a batch of changes: kept and tried again, and the runs keep them in Redis (rows are not affected)',
          );
        this.#failing = true;
        return;
      }
      this.#pending.splice(0, batch.length);
      this.stats.written += batch.length;
      this.stats.pending = this.#pending.length;
      if (this.#failing) this.#logger.info({ written: this.stats.written }, 'history database answers again');
      this.#failing = false;
      const done = new Map<string, { workspace: string; runId: string; n: number }>();
      for (const c of batch)
        if (c.last) {
          const key = `${c.workspace}\n${c.runId}`;
          const e = done.get(key) ?? { workspace: c.workspace, runId: c.runId, n: 0 };
          e.n++;
          done.set(key, e);
        }
      await this.#count(done);
    }
    if (this.#empty.size > 0) {
      const empty = this.#empty;
      this.#empty = new Map();
      await this.#count(empty);
    }
  }

  /** Counts written results on their runs' marks. A count lost here only makes a catch-up write them again. */
  async #count(done: Map<string, { workspace: string; runId: string; n: number }>): Promise<void> {
    if (!this.#marks) return;
    const marks = this.#marks;
    await Promise.all(
      [...done.values()].map((e) =>
        marks.addLive(e.workspace, e.runId, e.n).catch((err: unknown) => {
          this.#logger.debug(
            { err: errorMessage(err), runId: e.runId },
            'history written but not counted: a catch-up writes it again',
          );
        }),
      ),
    );
  }

  /** Inserts changes (a change already in the table is skipped). Throws when the database does not take them. */
  async write(changes: readonly HistoryChange[]): Promise<void> {
    if (changes.length === 0) return;
    try {
      await this.#ensure();
      await this.#insert(changes);
    } catch (err) {
      this.#ready = undefined;
      throw err;
    }
  }

  #ensure(): Promise<void> {
    this.#ready ??= this.#create();
    return this.#ready;
  }

  async #create(): Promise<void> {
    const t = this.#table;
    await this.#pool.query(
      `CREATE TABLE IF NOT EXISTS ${t.sql} (
          id bigserial PRIMARY KEY,
          workspace text NOT NULL,
          record_id text NOT NULL,
          field text NOT NULL,
          before text,
          after text NOT NULL,
          run_id text NOT NULL,
          row_number integer NOT NULL,
          at timestamptz NOT NULL
        );
        CREATE INDEX IF NOT EXISTS ${t.index('record')} ON ${t.sql} (workspace, record_id, at DESC);`,
    );
    const { rows } = await this.#pool.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [
      t.qualifiedIndex('change'),
    ]);
    if (rows[0]?.found) return;
    // A table an earlier version wrote has no unique index; a change it holds twice (none
    // should) keeps its first row, so the index can be made.
    await this.#pool.query(
      `DELETE FROM ${t.sql} a USING ${t.sql} b
        WHERE a.id > b.id AND a.workspace = b.workspace AND a.run_id = b.run_id
          AND a.row_number = b.row_number AND a.field = b.field;
       CREATE UNIQUE INDEX IF NOT EXISTS ${t.index('change')} ON ${t.sql} (workspace, run_id, row_number, field);`,
    );
  }

  async #insert(batch: readonly HistoryChange[]): Promise<void> {
    const col = <T>(f: (c: HistoryChange) => T) => batch.map(f);
    await this.#pool.query(
      `INSERT INTO ${this.#table.sql} (workspace, record_id, field, before, after, run_id, row_number, at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::timestamptz[])
       ON CONFLICT (workspace, run_id, row_number, field) DO NOTHING`,
      [
        col((c) => c.workspace),
        col((c) => c.recordId),
        col((c) => c.field),
        col((c) => c.before),
        col((c) => c.after),
        col((c) => c.runId),
        col((c) => c.row),
        col((c) => c.at),
      ],
    );
  }

  /** A record's changes, newest first (the `history` command with a history database). */
  async query(
    workspace: string,
    recordId: string,
    namesOf: (runId: string) => Promise<RunNames> = () => Promise.resolve({}),
  ): Promise<HistoryEntry[]> {
    try {
      await this.#ensure();
    } catch (err) {
      this.#ready = undefined;
      throw err;
    }
    const { rows } = await this.#pool.query<{
      field: string;
      before: string | null;
      after: string;
      run_id: string;
      row_number: number;
      at: Date;
    }>(
      `SELECT field, before, after, run_id, row_number, at FROM ${this.#table.sql}
        WHERE workspace = $1 AND record_id = $2 ORDER BY at DESC, id DESC`,
      [workspace, recordId],
    );
    const entries: HistoryEntry[] = [];
    for (const r of rows)
      entries.push({
        at: r.at.toISOString(),
        runId: r.run_id,
        row: r.row_number,
        field: r.field,
        before: r.before === null ? null : changeValue(r.before),
        after: changeValue(r.after),
        ...namedChange((await namesOf(r.run_id))[r.field], r.before, r.after),
        from: 'postgres' as const,
      });
    return entries;
  }

  /** Whether the database answers (`check`): null when it does, else why not. */
  async ping(): Promise<string | null> {
    try {
      await this.#ensure();
      return null;
    } catch (err) {
      this.#ready = undefined;
      return errorMessage(err);
    }
  }

  /** Writes what is buffered (one last try), then lets the connections go. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
    if (this.#pending.length > 0)
      this.#logger.warn(
        { pending: this.#pending.length },
        'history changes not written to the database at close: the runs keep them in Redis, and a worker writes them once the database answers',
      );
    await this.#pool.end().catch(() => undefined);
  }
}
