import { createRequire } from 'node:module';
import type pg from 'pg';
import { DEFAULTS } from '../config/index.js';
import { errorMessage } from '../errors/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import { changeValue, type RowResult } from '../runs/index.js';
import type { HistoryEntry } from './record-history.js';

/** Where the fleet's history goes: a PostgreSQL URL and the (optionally schema-qualified) table. */
export interface PgHistoryOptions {
  url: string;
  /** Default DEFAULTS.history.table. Letters, digits and `_`, with one optional `schema.` part. */
  table?: string;
  logger?: Logger;
  /** Rows per INSERT, and the longest a change waits to be written (ms). Default DEFAULTS.history. */
  batchRows?: number;
  flushMs?: number;
  /** Changes held while the database does not answer; beyond, the oldest are dropped and counted. */
  maxPending?: number;
}

/** What the history writer did: for logs, `check`, tests. */
export interface PgHistoryStats {
  written: number;
  pending: number;
  /** Failed batch writes (each retried later). */
  failures: number;
  /** Changes dropped because too many waited while the database did not answer: a gap, reported. */
  dropped: number;
  lastError?: string;
}

interface Change {
  workspace: string;
  recordId: string;
  field: string;
  before: string | null;
  after: string;
  runId: string;
  row: number;
  at: Date;
}

const TABLE = /^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$/i;

/**
 * History that outlives Redis (issue 34, item 4): every applied field change, one table row each
 * (workspace, record, field, before, after, run, row, time), written in batches. The table is
 * created on first use. A write never blocks or fails a row: `add` only buffers; a failed batch
 * stays buffered and is tried again on the next flush (logged once per failure streak), and
 * changes past `maxPending` are dropped and counted (`stats.dropped`: the gap).
 */
export class PgHistory {
  readonly #pool: pg.Pool;
  readonly #table: string;
  readonly #logger: Logger;
  readonly #batchRows: number;
  readonly #maxPending: number;
  #pending: Change[] = [];
  #ready: Promise<void> | undefined;
  #timer: NodeJS.Timeout;
  #flushing: Promise<void> | undefined;
  #failing = false;
  readonly stats: PgHistoryStats = { written: 0, pending: 0, failures: 0, dropped: 0 };

  constructor(options: PgHistoryOptions) {
    const table = options.table ?? DEFAULTS.history.table;
    if (!TABLE.test(table)) throw new Error(`history table name not allowed: ${table}`);
    this.#table = table;
    this.#logger = options.logger ?? silentLogger;
    this.#batchRows = options.batchRows ?? DEFAULTS.history.batchRows;
    this.#maxPending = options.maxPending ?? DEFAULTS.history.maxPending;
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
      if (r.status !== 'succeeded' || r.changes === undefined || r.recordId === undefined) continue;
      for (const [field, [before, after]] of Object.entries(r.changes))
        this.#pending.push({
          workspace,
          recordId: r.recordId,
          field,
          before,
          after,
          runId,
          row: r.row,
          at: new Date(r.at),
        });
    }
    const over = this.#pending.length - this.#maxPending;
    if (over > 0) {
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
        await this.#ensure();
        await this.#insert(batch);
      } catch (err) {
        this.stats.failures++;
        this.stats.lastError = errorMessage(err);
        if (!this.#failing)
          this.#logger.warn(
            { err: this.stats.lastError, pending: this.#pending.length },
            'history database did not take a batch of changes: kept and tried again (rows are not affected)',
          );
        this.#failing = true;
        this.#ready = undefined;
        return;
      }
      this.#pending.splice(0, batch.length);
      this.stats.written += batch.length;
      this.stats.pending = this.#pending.length;
      if (this.#failing) this.#logger.info({ written: this.stats.written }, 'history database answers again');
      this.#failing = false;
    }
  }

  #ensure(): Promise<void> {
    this.#ready ??= this.#pool
      .query(
        `CREATE TABLE IF NOT EXISTS ${this.#table} (
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
        CREATE INDEX IF NOT EXISTS ${this.#table.replace(/^.*\./, '')}_record
          ON ${this.#table} (workspace, record_id, at DESC);`,
      )
      .then(() => undefined);
    return this.#ready;
  }

  async #insert(batch: readonly Change[]): Promise<void> {
    const col = <T>(f: (c: Change) => T) => batch.map(f);
    await this.#pool.query(
      `INSERT INTO ${this.#table} (workspace, record_id, field, before, after, run_id, row_number, at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::timestamptz[])`,
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
  async query(workspace: string, recordId: string): Promise<HistoryEntry[]> {
    await this.#ensure();
    const { rows } = await this.#pool.query<{
      field: string;
      before: string | null;
      after: string;
      run_id: string;
      row_number: number;
      at: Date;
    }>(
      `SELECT field, before, after, run_id, row_number, at FROM ${this.#table}
        WHERE workspace = $1 AND record_id = $2 ORDER BY at DESC, id DESC`,
      [workspace, recordId],
    );
    return rows.map((r) => ({
      at: r.at.toISOString(),
      runId: r.run_id,
      row: r.row_number,
      field: r.field,
      before: r.before === null ? null : changeValue(r.before),
      after: changeValue(r.after),
      from: 'postgres' as const,
    }));
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
      this.#logger.warn({ pending: this.#pending.length }, 'history changes not written to the database at close');
    await this.#pool.end().catch(() => undefined);
  }
}
