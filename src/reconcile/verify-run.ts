import { once } from 'node:events';
import { stringify } from 'csv-stringify/sync';
import type { CrmClient, ListResource, Operation } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import { openSource, parseMapping, RowDecoder, type Mapping } from '../ingest/index.js';
import { sourceIdentity } from '../queue/index.js';
import { escapeCsvCell, type RunStore } from '../runs/index.js';
import { canonicalFromRow, diffFields, showCanonical, type IndexedRecord } from './compare.js';
import { normaliseName } from './deal-lookup.js';
import { RecordIndex } from './record-index.js';

export interface VerifyRunOptions {
  runId: string;
  store: RunStore;
  /** Client of the run's workspace. */
  client: CrmClient;
  /** Drift CSV (row,line,record_id,field,sent,current), one line per differing field. Default: none. */
  out?: NodeJS.WritableStream;
  /** Records per list page. Default 100. */
  pageSize?: number;
}

export interface VerifyResult {
  runId: string;
  /** Succeeded rows compared with the CRM. */
  checked: number;
  matching: number;
  /** Rows whose record differs from what was sent. */
  drifted: number;
  /** Rows whose record is no longer in the CRM's list. */
  missing: number;
  /** Drifted rows per field. */
  byField: Record<string, number>;
  /** Succeeded rows whose record id another row of the run also recorded. */
  sharedIds: number;
  /** Create rows (deal.create, upsert creates) that more than one deal matches: a duplicate was made. */
  suspectedDuplicates: number;
  listPages: number;
}

export const VERIFY_CSV_COLUMNS = ['row', 'line', 'record_id', 'field', 'sent', 'current'] as const;

const RESOURCE_OF: Partial<
  Record<Operation | 'deal.upsert', { resource: ListResource; mapOp: Exclude<Operation, 'team.invite'> }>
> = {
  'deal.update': { resource: 'deals', mapOp: 'deal.update' },
  'deal.upsert': { resource: 'deals', mapOp: 'deal.update' },
  'deal.create': { resource: 'deals', mapOp: 'deal.create' },
  'lead.update': { resource: 'leads', mapOp: 'lead.update' },
  'contact.update': { resource: 'contacts', mapOp: 'contact.update' },
};

/**
 * After a run: pages the CRM again and compares every succeeded row's record with what the
 * row sent. What was sent is recomputed from the run's source file and stored mapping (results
 * of succeeded rows do not keep their values), so the source must still be there, unchanged.
 * `position` is left out: the API never reports it, so it cannot drift visibly.
 */
export async function verifyRun(options: VerifyRunOptions): Promise<VerifyResult> {
  const { store, runId } = options;
  const run = await store.requireRun(runId);
  const kind = RESOURCE_OF[run.operation];
  if (!kind)
    throw new CrmSyncError('USAGE', `run ${runId} is a ${run.operation} run: only record writes can be verified`);
  const was = { size: run.options.sourceSize, mtime: run.options.sourceMtimeMs };
  const now = sourceIdentity(run.source);
  if (was.size !== undefined && (now.sourceSize !== was.size || now.sourceMtimeMs !== was.mtime)) {
    // What was sent is recomputed from the file: a changed file would report its changes as drift.
    throw new CrmSyncError(
      'RUN_STATE',
      `${run.source} changed since run ${runId} began (size ${was.size} → ${now.sourceSize ?? 'gone'} bytes, modified ${new Date(was.mtime ?? 0).toISOString()} → ` +
        `${now.sourceMtimeMs !== undefined ? new Date(now.sourceMtimeMs).toISOString() : 'gone'}): verify compares the CRM with what that file said, so it cannot check this run`,
    );
  }
  const mapping: Mapping | undefined =
    run.options.mapping !== undefined ? parseMapping(run.options.mapping, `mapping of run ${runId}`) : undefined;
  // Only the rows the run sent are compared, so other columns are no reason to stop here.
  const decoder = new RowDecoder({ op: kind.mapOp, ...(mapping ? { mapping } : {}), ignoreUnknownColumns: true });

  const sent = new Map<number, string>();
  for await (const result of store.iterateResults(runId)) {
    if (result.status === 'succeeded' && result.recordId !== undefined) sent.set(result.row, result.recordId);
  }
  const index = await RecordIndex.build(options.client, {
    resource: kind.resource,
    ...(options.pageSize ? { pageSize: options.pageSize } : {}),
  });
  const outcome: VerifyResult = {
    runId,
    checked: 0,
    matching: 0,
    drifted: 0,
    missing: 0,
    byField: {},
    sharedIds: 0,
    suspectedDuplicates: 0,
    listPages: index.pages,
  };
  const rowsById = new Map<string, number>();
  for (const id of sent.values()) rowsById.set(id, (rowsById.get(id) ?? 0) + 1);
  // Deals by normalised name: a create's row that several deals match means one was made twice.
  const createsDeals = run.operation === 'deal.create' || run.operation === 'deal.upsert';
  const dealsByName = createsDeals ? groupByName(index) : new Map<string, IndexedRecord[]>();
  const write = async (cells: string[]) => {
    if (options.out && !options.out.write(stringify([cells.map(escapeCsvCell)]))) await once(options.out, 'drain');
  };
  await write([...VERIFY_CSV_COLUMNS]);

  const reader = openSource(run.source, {
    ...(run.options.format ? { format: run.options.format } : {}),
    ...(run.options.delimiter ? { delimiter: run.options.delimiter } : {}),
  });
  for await (const item of reader) {
    const recordId = sent.get(item.row);
    if (item.kind !== 'record' || recordId === undefined) continue;
    outcome.checked++;
    const record = index.byId(recordId);
    if (!record) {
      outcome.missing++;
      await write([String(item.row), String(item.line), recordId, '(record)', 'exists', 'missing']);
      continue;
    }
    const { fields } = decoder.mapValues(item.values);
    if ((rowsById.get(recordId) ?? 0) > 1) {
      outcome.sharedIds++;
      await write([
        String(item.row),
        String(item.line),
        recordId,
        '(shared id)',
        'one row per record',
        `${rowsById.get(recordId)} rows`,
      ]);
    }
    if (createsDeals && typeof fields.name === 'string') {
      const value = fields.value === undefined ? undefined : canonicalFromRow('value', fields.value);
      const twins = (dealsByName.get(normaliseName(fields.name)) ?? []).filter(
        (d) => value === undefined || d.values.value === value,
      );
      if (twins.length > 1) {
        outcome.suspectedDuplicates++;
        await write([
          String(item.row),
          String(item.line),
          recordId,
          '(duplicate)',
          'one deal',
          twins.map((d) => d.id).join(';'),
        ]);
      }
    }
    const changes = diffFields(kind.resource, fields, record, ['id', 'position']);
    if (changes.length === 0) {
      outcome.matching++;
      continue;
    }
    outcome.drifted++;
    for (const c of changes) {
      outcome.byField[c.field] = (outcome.byField[c.field] ?? 0) + 1;
      await write([
        String(item.row),
        String(item.line),
        recordId,
        c.field,
        showCanonical(c.wanted),
        showCanonical(c.current),
      ]);
    }
  }
  return outcome;
}

function groupByName(index: RecordIndex): Map<string, IndexedRecord[]> {
  const byName = new Map<string, IndexedRecord[]>();
  for (const record of index.all()) {
    const key = normaliseName(record.name);
    const held = byName.get(key);
    if (held) held.push(record);
    else byName.set(key, [record]);
  }
  return byName;
}
