// Reconcile without sending (`reconcile --out`, `crm-sync plan`): the source's checks, the CRM's
// list as an index, and every row's decision. Kept apart from reconcile-import.ts, which queues
// rows, so that `plan` does not load the queue side (BullMQ, the workers): ~19 MB of RSS of a
// plan's peak (bench/RESULTS.md, "Change control").
import { once } from 'node:events';
import { defaultMatchKey as matchKeyOf, type CrmClient } from '../crm/index.js';
import {
  asSource,
  checkSource,
  type CheckedSource,
  csvDialectOf,
  type DialectFacts,
  type LoadReferences,
  type Mapping,
  type RowDecoder,
  type Source,
  type SourceFormat,
  type SourceReader,
} from '../ingest/index.js';
import { CrmSyncError } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import type { RequestBudget } from '../rate/index.js';
import { ReferenceCollector, readReferences, type ReferenceStore } from '../references/index.js';
import { emptyPlanCounts, planCsvHeader, planCsvLine, type PlanCounts } from './plan-csv.js';
import {
  checkRow,
  keyColumnOf,
  keyColumnProblem,
  planRows,
  reconcileDecoder,
  type PlannedRow,
  type RowCheck,
} from './plan-rows.js';
import { RecordIndex } from './record-index.js';
import { PlanTally, type PlanSummary } from './plan-tally.js';
import { RECONCILE_RESOURCE, type ReconcileOperation } from './resource-fields.js';

export interface ReconcileSourceOptions {
  /** A file's path (read with `format` and `delimiter`), or an opened Source (stdin, a database query): planned alike. */
  file: string | Source;
  op: ReconcileOperation;
  workspace: string;
  /** Client of the workspace; its listVersion decides v1/v2 unless `listVersion` is given. */
  client: CrmClient;
  /** The workspace's shared request budget: every list page takes a token. Default: pages are not budgeted. */
  budget?: RequestBudget;
  /** Default: `email` for contacts and leads, `unique_number` for deal updates, `name` for deal upserts. */
  matchKey?: string;
  /** Source column holding the key. Default: the column mapped to the key's field, else one named like it. */
  keyColumn?: string;
  /** Default: columns named like the API fields. */
  mapping?: { mapping: Mapping; raw: unknown };
  /** Default: from the file extension. */
  format?: SourceFormat;
  /** CSV delimiter. Default: sniffed from the header line. */
  delimiter?: string;
  /** Skip columns that map to no field instead of refusing the file. Default false. */
  ignoreUnknownColumns?: boolean;
  /** Called once the file's columns passed their checks, before the run is created or the CRM paged. */
  onChecked?: (reader: SourceReader, decoder: RowDecoder) => void;
  /** Records per list page. Default 100. */
  pageSize?: number;
  /** Default: the client's. */
  listVersion?: 'v1' | 'v2';
  /** Default: silent. */
  logger?: Logger;
  /**
   * Where the workspace's references are shared (names in the mapping resolve from them): the
   * index's own pages refresh the pass of its list, other lists' stored passes add to it while
   * younger than `maxAgeMs`. Default: only what the index's pages show.
   */
  references?: { store: ReferenceStore; maxAgeMs: number };
}

/** What reading and checking the source takes: reconcile's options less the CRM's. */
export type SourceCheckOptions = Omit<ReconcileSourceOptions, 'client' | 'budget' | 'pageSize' | 'listVersion'>;

export interface IndexStats {
  pages: number;
  records: number;
  ms: number;
  /** List requests made for names beyond the index's own pages (0: its pages or the store had them). */
  referencePages?: number;
}

export function defaultMatchKey(op: ReconcileOperation): string {
  return matchKeyOf(op);
}

/**
 * Pages the resource the operation writes into an index by the match key. With `decoder`, the
 * references its pages show go to the decoder (and the store) on the way: a mapping's names
 * cost no request beyond the index's own pages, unless they need another list's.
 */
export async function buildIndexFor(
  options: ReconcileSourceOptions & { keepPlaces?: boolean; decoder?: RowDecoder },
): Promise<{ index: RecordIndex; stats: IndexStats }> {
  const started = Date.now();
  const { budget, decoder } = options;
  const resource = RECONCILE_RESOURCE[options.op];
  const collector =
    decoder !== undefined && (decoder.referenceLists().length > 0 || options.references !== undefined)
      ? new ReferenceCollector(resource)
      : undefined;
  const index = await RecordIndex.build(options.client, {
    resource: RECONCILE_RESOURCE[options.op],
    matchKey: options.matchKey ?? defaultMatchKey(options.op),
    ...(options.pageSize !== undefined ? { pageSize: options.pageSize } : {}),
    ...(options.listVersion ? { version: options.listVersion } : {}),
    ...(budget ? { beforeFetch: () => budget.take() } : {}),
    ...(options.keepPlaces ? { keepPlaces: true } : {}),
    ...(collector ? { onRecords: (records) => records.forEach((r) => collector.add(r)) } : {}),
  });
  let referencePages = 0;
  if (collector && decoder) {
    const read = await readReferences({
      client: options.client,
      ...(budget ? { budget } : {}),
      ...(options.references ? { store: options.references.store, maxAgeMs: options.references.maxAgeMs } : {}),
      lists: decoder.referenceLists(),
      fresh: [collector.pass()],
      ...(options.listVersion ? { version: options.listVersion } : {}),
    });
    referencePages = read.pages;
    decoder.useReferences(read.index);
  }
  return {
    index,
    stats: {
      pages: index.pages,
      records: index.size,
      ms: Date.now() - started,
      ...(referencePages > 0 ? { referencePages } : {}),
    },
  };
}

/**
 * Opens the source and checks it against the reconcile's one decoder (columns, key column, an
 * empty file) before a run exists or a page of the CRM is read.
 */
export async function openChecked(
  options: SourceCheckOptions,
): Promise<{ source: Source; reader: SourceReader; decoder: RowDecoder } & CheckedSource> {
  const matchKey = options.matchKey ?? defaultMatchKey(options.op);
  const source = asSource(options.file, {
    ...(options.format ? { format: options.format } : {}),
    ...(options.delimiter ? { delimiter: options.delimiter } : {}),
  });
  const reader = source.reader;
  const planning = { op: options.op, matchKey, refColumn: source.keyColumn, ...mappingOf(options) };
  const decoder = reconcileDecoder(planning);
  const checked = await checkSource(reader, decoder, (columns) => keyColumnProblem(decoder, columns, planning));
  try {
    options.onChecked?.(reader, decoder);
  } catch (err) {
    await checked.close();
    throw err;
  }
  return { source, reader, decoder, ...checked };
}

export interface PlanReconcileOptions extends ReconcileSourceOptions {
  /** Where the plan CSV goes (one line per row). Default: nowhere. */
  out?: NodeJS.WritableStream;
  /**
   * Called with every planned row, in source order (`crm-sync plan` stores them), and its
   * record's place in the CRM's list as read (with `keepPlaces`). Default: none.
   */
  onRow?: (row: PlannedRow, place: number | undefined) => void | Promise<void>;
  /** Keep each record's place in the list for onRow (RecordIndex.placeOf). Default false. */
  keepPlaces?: boolean;
}

export interface PlanResult {
  counts: PlanCounts;
  rows: number;
  index: IndexStats;
  /** Per field: rows that change it, empty it, or have it held back by a write policy. */
  summary: PlanSummary;
  /** How the source file was written (a CSV's delimiter, BOM, line ends). */
  dialect: DialectFacts;
}

/** How the source was written, as the plan and its CSVs keep it (known once the header was checked). */
function dialectOf(source: { facts(): DialectFacts }): DialectFacts {
  const { format, delimiter, bom, lineEnding } = source.facts();
  return {
    ...(format !== undefined ? { format } : {}),
    ...(delimiter !== undefined ? { delimiter } : {}),
    ...(bom !== undefined ? { bom } : {}),
    ...(lineEnding !== undefined ? { lineEnding } : {}),
  };
}

/** Reconcile without sending: what each row would do, as counts and (optionally) a CSV. */
export async function planReconcile(options: PlanReconcileOptions): Promise<PlanResult> {
  const { source, decoder, items, close } = await openChecked(options);
  try {
    // Known once the header was checked: the plan and its CSVs are written as the source was.
    const dialect = dialectOf(source);
    const csv = csvDialectOf(dialect);
    const { index, stats } = await buildIndexFor({ ...options, decoder });
    const counts = emptyPlanCounts();
    const tally = new PlanTally();
    let rows = 0;
    // A line is only made for a CSV someone reads: without `out`, making 100,000 of them was a
    // fifth of a plan's allocations (bench/RESULTS.md, "Change control").
    const { out } = options;
    const write = async (text: () => string) => {
      if (out && !out.write(text())) await once(out, 'drain');
    };
    await write(() => planCsvHeader(csv));
    for await (const row of planRows(items, { op: options.op, index, ...mappingOf(options) }, decoder)) {
      rows++;
      counts[row.action]++;
      tally.add(row);
      await options.onRow?.(row, row.recordId !== undefined ? index.placeOf(row.recordId) : undefined);
      await write(() => planCsvLine(row, csv));
    }
    return { counts, rows, index: stats, summary: tally.summary(), dialect };
  } finally {
    await close();
  }
}

export function mappingOf(options: SourceCheckOptions): {
  mapping?: Mapping;
  keyColumn?: string;
  ignoreUnknownColumns?: boolean;
} {
  return {
    ...(options.mapping ? { mapping: options.mapping.mapping } : {}),
    ...(options.keyColumn !== undefined ? { keyColumn: options.keyColumn } : {}),
    ...(options.ignoreUnknownColumns ? { ignoreUnknownColumns: true } : {}),
  };
}

export interface CheckRowsOptions extends SourceCheckOptions {
  /** Called with every invalid row, in source order. */
  onInvalid?: (
    row: { row: number; line: number; original: Record<string, string> } & Required<RowCheck>,
  ) => void | Promise<void>;
  /** Called every `progressEvery` rows and at the end with the rows read and the bytes of the file read. */
  onProgress?: (rows: number, bytesRead: number, totalBytes: number) => void | Promise<void>;
  /** Default 5,000. */
  progressEvery?: number;
  /** Stops between rows. */
  signal?: AbortSignal;
  /** Where a mapping's names (`"by": "name"`) resolve from, as for a plain import. Without it such a mapping is refused. */
  loadReferences?: LoadReferences;
}

export interface CheckRowsResult {
  rows: number;
  valid: number;
  invalid: number;
  /** The source's columns (a JSON file's: every key seen). */
  columns: string[];
  dialect: DialectFacts;
}

/**
 * Every row of the source checked as a plan would check it, without reading the CRM (the
 * dashboard's import check): the same source checks (columns against the mapping, the key
 * column), the same decoder, and checkRow's rules for each row. Nothing is stored or sent.
 */
export async function checkRows(options: CheckRowsOptions): Promise<CheckRowsResult> {
  const matchKey = options.matchKey ?? defaultMatchKey(options.op);
  const { source, reader, decoder, items, close } = await openChecked(options);
  const lists = decoder.referenceLists();
  if (lists.length > 0) {
    try {
      if (options.loadReferences === undefined)
        throw new CrmSyncError(
          'USAGE',
          'the mapping names references by name ("by": "name"), which this check cannot read from the CRM',
        );
      decoder.useReferences(await options.loadReferences(lists));
    } catch (err) {
      await close();
      throw err;
    }
  }
  const rules = {
    op: options.op,
    matchKey,
    keyColumn: keyColumnOf(matchKey, options.mapping?.mapping, options.keyColumn),
  };
  const every = options.progressEvery ?? 5000;
  let rows = 0;
  let invalid = 0;
  try {
    for await (const item of items) {
      rows++;
      const checked = checkRow(item, decoder, rules);
      if (checked.errors !== undefined) {
        invalid++;
        const { row, line, original } = item;
        await options.onInvalid?.({ row, line, original, code: checked.code ?? 'ROW_INVALID', errors: checked.errors });
      }
      if (rows % every === 0) {
        options.signal?.throwIfAborted();
        await options.onProgress?.(rows, reader.bytesRead, reader.totalBytes);
      }
    }
    await options.onProgress?.(rows, reader.bytesRead, reader.totalBytes);
    const dialect = dialectOf(source);
    return { rows, valid: rows - invalid, invalid, columns: [...reader.columns], dialect };
  } finally {
    await close();
  }
}
