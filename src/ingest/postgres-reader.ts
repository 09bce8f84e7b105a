import { createRequire } from 'node:module';
import type pg from 'pg';
import type Cursor from 'pg-cursor';
import { readSecret, type Secret } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import { setField } from './records.js';
import type { Source, SourceFacts } from './source.js';
import { DEFAULT_MAX_COLUMNS, type QuerySourceSpec, type SourceItem, type SourceReader } from './source-types.js';

/** Where a database URL is read from, as an API key is: an env variable or a file (never the URL itself). */
export type DatabaseUrlSource = { env: string } | { file: string };

export interface PostgresSourceSettings {
  /** The connection string (postgres://user:password@host:port/db); revealed only to connect. */
  url: Secret;
  urlSource: DatabaseUrlSource;
  /** A SELECT (or anything that returns rows); it runs in a READ ONLY transaction. */
  query: string;
  keyColumn?: string;
  /** Rows fetched from the server-side cursor at a time: what bounds this process's memory. Default 500. */
  batchRows?: number;
  /** Most columns the query may return. Default 500, as for files. */
  maxColumns?: number;
  /** How long connecting may take. Default 10000 ms. */
  connectTimeoutMs?: number;
}

/** Small enough that a read in flight is a few hundred KB; large enough that round trips do not dominate on a LAN. */
const DEFAULT_BATCH_ROWS = 500;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const REDACTED = '[redacted]';

/**
 * Values arrive in PostgreSQL's text form (the wire's text format, unparsed), so the one row
 * decoder sees what it sees in a CSV cell: numbers, numerics and dates exactly as the database
 * prints them, with no float rounding and no time-zone shift. Only these differ from text:
 * booleans are `true`/`false` (the decoder's yes/no words, not `t`/`f`), and one-dimensional
 * arrays are lists of text (a `list` field takes them as they are).
 */
const ARRAY_OIDS = new Set([
  1000, 1002, 1005, 1007, 1009, 1014, 1015, 1016, 1021, 1022, 1115, 1182, 1185, 1231, 2951, 199, 3807,
]);
const BOOL_OID = 16;

/**
 * pg and pg-cursor are loaded when a database source is first read, not when the CLI starts: an
 * import of a file never needs them, and they cost 0.06–0.1 s of CPU on every start (bench/RESULTS.md,
 * "CLI start-up"). Required, not imported: both are CommonJS, and require keeps the loader synchronous.
 */
let loaded: { pg: typeof pg; Cursor: typeof Cursor; types: pg.CustomTypesConfig } | undefined;
function loadPg(): NonNullable<typeof loaded> {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  const driver = require('pg') as typeof pg;
  // 1009 is text[]: its parser splits any array's text form into strings (TypeId lists scalar types only).
  const parseTextArray = (driver.types.getTypeParser as (oid: number, format: 'text') => (value: string) => unknown)(
    1009,
    'text',
  ) as (value: string) => Array<string | null>;
  const types = {
    getTypeParser: (oid: number) => {
      if (oid === BOOL_OID) return (value: string) => (value === 't' ? 'true' : 'false');
      if (ARRAY_OIDS.has(oid)) return (value: string) => parseTextArray(value).filter((v): v is string => v !== null);
      return (value: string) => value;
    },
    // pg's CustomTypesConfig overloads getTypeParser per format; only the text format is used here.
  } as unknown as pg.CustomTypesConfig;
  loaded = { pg: driver, Cursor: require('pg-cursor') as typeof Cursor, types };
  return loaded;
}

/** A cell as an export shows it: NULL empty, a list joined with `;` (the default list separator, so a retry reads it back alike). */
function asText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.join(';');
  return String(value);
}

/** `host:port/database as user`: where the source points, for messages; never the password. */
export function describeDatabase(url: Secret): string {
  try {
    const u = new URL(url.reveal());
    const db = decodeURIComponent(u.pathname.replace(/^\//, '')) || '(default database)';
    return `${u.hostname}${u.port ? `:${u.port}` : ''}/${db}${u.username ? ` as ${decodeURIComponent(u.username)}` : ''}`;
  } catch {
    // A key=value connection string: nothing in it is shown, any part may be the password.
    return 'the database';
  }
}

/** A driver message with the connection string and password taken out (a DNS error names the host, a few name more). */
export function scrubSecret(text: string, url: Secret): string {
  const secrets = [url.reveal()];
  try {
    const u = new URL(url.reveal());
    if (u.password) secrets.push(u.password, decodeURIComponent(u.password));
  } catch {
    const password = /password\s*=\s*'?([^'\s]+)/i.exec(url.reveal())?.[1];
    if (password) secrets.push(password);
  }
  let out = text;
  for (const s of secrets.filter((s) => s.length > 0).sort((a, b) => b.length - a.length))
    out = out.split(s).join(REDACTED);
  return out;
}

interface DriverError {
  message: string;
  code?: string;
  position?: string;
  hint?: string;
}

/** SQLSTATE classes and socket errors that mean the database was not there, or refused us: not the query's fault. */
function isUnreachable(err: DriverError): boolean {
  const code = err.code ?? '';
  if (/^(08|28|3D|57P)/.test(code)) return true;
  if (/^E[A-Z]+$/.test(code)) return true;
  return /timeout|terminated|ECONNRESET|connect/i.test(err.message) && code.length !== 5;
}

function urlSourceText(source: DatabaseUrlSource): string {
  return 'env' in source ? `env variable ${source.env}` : `file ${source.file}`;
}

/**
 * A PostgreSQL query as a row source: it runs in a READ ONLY transaction (one consistent
 * snapshot, and a mistyped UPDATE cannot write) and is read through a server-side cursor
 * `batchRows` at a time, so memory stays bounded for any table size. Each iteration runs the
 * query afresh on a connection of its own, closed when the iteration ends (read to the end,
 * stopped early, or failed). Failures are DB_UNREACHABLE (connecting, authenticating, the
 * connection lost) or DB_QUERY (the query itself); their messages never hold the URL or password.
 */
export class PostgresSourceReader implements SourceReader, Source {
  readonly format = 'postgres' as const;
  readonly totalBytes = 0;
  readonly noun = 'query' as const;
  /** A query need not give the same rows in the same order again: its runs are never resumed. */
  readonly resumable = false;
  readonly spec: QuerySourceSpec;
  /** What the run's `source` says: safe to show and log (the URL's origin, not the URL). */
  readonly label: string;
  #columns: string[] = [];
  #header: { promise: Promise<void>; resolve: () => void } | undefined;
  readonly #settings: PostgresSourceSettings;

  constructor(settings: PostgresSourceSettings) {
    if (settings.query.trim() === '') throw new CrmSyncError('USAGE', 'the query is empty');
    this.#settings = settings;
    const { urlSource, query, keyColumn } = settings;
    this.spec = {
      ...('env' in urlSource ? { urlEnv: urlSource.env } : { urlFile: urlSource.file }),
      query,
      ...(keyColumn !== undefined ? { keyColumn } : {}),
    };
    const oneLine = query.replace(/\s+/g, ' ').trim();
    this.label = `postgres (${'env' in urlSource ? `$${urlSource.env}` : urlSource.file}): ${oneLine.length > 200 ? `${oneLine.slice(0, 200)}…` : oneLine}`;
  }

  get columns(): string[] {
    return this.#columns;
  }

  /** The query is its own reader: each iteration runs it afresh. */
  get reader(): SourceReader {
    return this;
  }

  get keyColumn(): string | undefined {
    return this.spec.keyColumn;
  }

  /** The query and where its URL comes from, never the URL. */
  facts(): SourceFacts {
    return { query: this.spec };
  }

  commandWords(): string {
    return '--from-postgres --query <the same query>';
  }

  /** Nothing outlives a read: each iteration's connection is closed when it ends. */
  close(): Promise<string | undefined> {
    return Promise.resolve(undefined);
  }

  /** Bytes are not counted for a query (its size is not known ahead). */
  get bytesRead(): number {
    return 0;
  }

  /** Resolves once the query's columns are known (its row description arrived), before any row. */
  headerRead(): Promise<void> {
    this.#header ??= deferred();
    return this.#header.promise;
  }

  [Symbol.asyncIterator](): AsyncIterator<SourceItem> {
    this.#columns = [];
    const header = this.#header ?? deferred();
    this.#header = header;
    return this.#rows(header.resolve);
  }

  async *#rows(onHeader: () => void): AsyncGenerator<SourceItem> {
    const s = this.#settings;
    const where = `${describeDatabase(s.url)} (URL from ${urlSourceText(s.urlSource)})`;
    const fail = (err: unknown, stage: 'connect' | 'query', rows: number): CrmSyncError => {
      if (err instanceof CrmSyncError) return err;
      const e = (err ?? {}) as DriverError;
      const message = scrubSecret(String(e.message ?? err), s.url);
      const state = e.code && /^[0-9A-Z]{5}$/.test(e.code) ? ` (SQLSTATE ${e.code})` : '';
      if (stage === 'connect' || isUnreachable(e)) {
        const when =
          stage === 'connect' ? 'cannot connect to' : `lost the connection to ${rows > 0 ? `after ${rows} rows ` : ''}`;
        return new CrmSyncError('DB_UNREACHABLE', `${when.trimEnd()} ${where}: ${message}${state}`);
      }
      const at = e.position ? ` at character ${e.position}` : '';
      const hint =
        e.code === '57014'
          ? // The cursor's statement lasts as long as the run is produced (the producer waits while
            // the queue is full), so a server-wide statement_timeout can end a long run part-way.
            '; hint: the query stays open while its rows are queued; allow it with statement_timeout=0 for this role, or options=-c%20statement_timeout%3D0 in the URL'
          : e.hint
            ? `; hint: ${scrubSecret(e.hint, s.url)}`
            : '';
      return new CrmSyncError('DB_QUERY', `the query failed${at}${state}: ${message}${hint} (on ${where})`);
    };
    const driver = loadPg();
    let client: pg.Client;
    try {
      client = new driver.pg.Client({
        connectionString: s.url.reveal(),
        connectionTimeoutMillis: s.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
        application_name: 'crm-sync',
      });
    } catch {
      // The driver parses the URL here (e.g. a '#' in an unencoded password); its words are not
      // repeated, they may quote the URL.
      throw new CrmSyncError(
        'USAGE',
        `the database URL from ${urlSourceText(s.urlSource)} is not a valid URL: check its form (postgres://user:password@host:port/database, special characters in the password percent-encoded)`,
      );
    }
    // A connection lost between reads is an 'error' event; unheard it would crash the process.
    // The next read fails with it, and that failure is what is reported.
    let lost: unknown;
    client.on('error', (err) => (lost = err));
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => undefined);
      throw fail(err, 'connect', 0);
    }
    let row = 0;
    try {
      // Dates and times print the same whatever the server's or the role's defaults (set here,
      // not as startup options: a URL's own `options` parameter would replace those).
      await client.query("SET TIME ZONE 'UTC'; SET datestyle = 'ISO, YMD'; SET intervalstyle = 'iso_8601'");
      await client.query('BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const cursor = client.query(new driver.Cursor(s.query, [], { rowMode: 'array', types: driver.types }));
      let names: string[] | undefined;
      const keyAt = () => (s.keyColumn === undefined ? -1 : (names ?? []).indexOf(s.keyColumn));
      let key = -1;
      for (;;) {
        const { rows, fields } = await readBatch(cursor, s.batchRows ?? DEFAULT_BATCH_ROWS);
        if (names === undefined) {
          names = fields.map((f) => f.name);
          this.#checkColumns(names);
          this.#columns.push(...names);
          key = keyAt();
          onHeader();
        }
        if (rows.length === 0) break;
        for (const cells of rows) {
          row++;
          const values: Record<string, unknown> = {};
          const original: Record<string, string> = {};
          for (let i = 0; i < names.length; i++) {
            const name = names[i] as string;
            setField(values, name, cells[i]);
            setField(original, name, asText(cells[i]));
          }
          const ref = key >= 0 ? asText(cells[key]) : '';
          // The query's row number stands in for a line: a query has no lines.
          yield { kind: 'record', row, line: row, values, original, ...(ref !== '' ? { ref } : {}) };
        }
      }
      await cursor.close();
      await client.query('COMMIT');
    } catch (err) {
      throw fail(lost ?? err, 'query', row);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  #checkColumns(names: string[]): void {
    const { keyColumn, maxColumns = DEFAULT_MAX_COLUMNS } = this.#settings;
    if (names.length > maxColumns)
      throw new CrmSyncError('INPUT_COLUMNS', `the query returns ${names.length} columns, more than ${maxColumns}`);
    const twice = names.filter((n, i) => names.indexOf(n) !== i);
    if (twice.length > 0)
      throw new CrmSyncError(
        'INPUT_COLUMNS',
        `the query returns more than one column named ${[...new Set(twice)].map((n) => JSON.stringify(n)).join(', ')}: name them apart with AS. Nothing was sent.`,
      );
    if (keyColumn !== undefined && !names.includes(keyColumn))
      throw new CrmSyncError(
        'INPUT_COLUMNS',
        `the key column ${JSON.stringify(keyColumn)} is not among the query's columns (${names.map((n) => JSON.stringify(n)).join(', ')}). Nothing was sent.`,
      );
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** One cursor read, with the row description (the callback form is the one that hands it over). */
function readBatch(cursor: Cursor<unknown[]>, n: number): Promise<{ rows: unknown[][]; fields: pg.FieldDef[] }> {
  return new Promise((resolve, reject) => {
    cursor.read(n, (err, rows, result) => {
      if (err) reject(err);
      else resolve({ rows, fields: (result as pg.QueryResult | undefined)?.fields ?? [] });
    });
  });
}

export function openPostgresSource(settings: PostgresSourceSettings): PostgresSourceReader {
  return new PostgresSourceReader(settings);
}

/**
 * A query source from what a sync definition or the command line says: the connection string
 * is read now from its env variable or file (SECRET_MISSING when it is not there), as a
 * workspace's API key is; `what` names it in that error ("database URL of sync nightly").
 */
export function openQuerySource(
  spec: QuerySourceSpec,
  what: string,
  env: NodeJS.ProcessEnv = process.env,
): PostgresSourceReader {
  const { urlEnv, urlFile, query, keyColumn } = spec;
  if ((urlEnv === undefined) === (urlFile === undefined))
    throw new CrmSyncError('USAGE', `${what}: give exactly one of an env variable or a file`);
  const urlSource: DatabaseUrlSource = urlEnv !== undefined ? { env: urlEnv } : { file: urlFile ?? '' };
  const url = readSecret(urlSource, what, env);
  return openPostgresSource({ url, urlSource, query, ...(keyColumn !== undefined ? { keyColumn } : {}) });
}
