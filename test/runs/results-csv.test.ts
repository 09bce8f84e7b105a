import { PassThrough, Writable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { afterAll, describe, expect, it } from 'vitest';
import {
  EXPORT_META_COLUMNS,
  RunStore,
  escapeCsvCell,
  unescapeCsvCell,
  writeResultsCsv,
  type RowResult,
} from '../../src/runs/index.js';
import { testRedis } from './redis-fixture.js';

const { redis, prefix, cleanup } = testRedis();
const store = new RunStore({ redis, prefix });

afterAll(cleanup);

async function exportCsv(runId: string, problemsOnly = false): Promise<{ rows: number; records: string[][] }> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (chunk: Buffer) => chunks.push(chunk));
  const { rows } = await writeResultsCsv(store, runId, out, { problemsOnly });
  out.end();
  const records = parse(Buffer.concat(chunks).toString('utf8'), { relax_column_count: false }) as string[][];
  return { rows, records };
}

async function exportedRun(): Promise<string> {
  const run = await store.createRun({
    workspace: 'acme',
    operation: 'lead.update',
    source: 'leads.csv',
    columns: ['id', 'status', 'note'],
  });
  const at = new Date().toISOString();
  await store.addQueued(run.id, 3);
  const results: RowResult[] = [
    { row: 1, line: 2, status: 'succeeded', recordId: '501', at, original: { id: '501', status: 'open', note: 'x' } },
    {
      row: 2,
      line: 3,
      status: 'failed',
      httpStatus: 422,
      code: 'CRM_REJECTED',
      message: 'status is not allowed',
      at,
      original: { id: '502', status: '=SUM(A1)', note: '+1' },
    },
    { row: 4, line: 6, status: 'succeeded', recordId: '504', at },
  ];
  await store.recordResults(run.id, results);
  await store.recordResults(
    run.id,
    [
      {
        row: 3,
        line: 4,
        status: 'invalid',
        code: 'ROW_INVALID',
        message: 'row is invalid',
        errors: [
          { field: 'id', message: 'must be a number' },
          { field: 'owner_id', message: 'is required' },
        ],
        at,
        original: { id: '-5', status: '@x', note: 'line one\nline two, "quoted"' },
      },
    ],
    { fromQueue: false },
  );
  return run.id;
}

describe('writeResultsCsv', () => {
  it('exports every row with meta columns first, then the run columns, escaped', async () => {
    const runId = await exportedRun();
    const { rows, records } = await exportCsv(runId);
    expect(rows).toBe(4);
    expect(records[0]).toEqual([...EXPORT_META_COLUMNS, 'id', 'status', 'note']);
    expect(records.slice(1)).toEqual([
      [runId, '1', '2', 'succeeded', '501', '', '', '', '', '', '', ''],
      [runId, '2', '3', 'failed', '', '422', 'status is not allowed', '', '', '502', "'=SUM(A1)", "'+1"],
      [
        runId,
        '3',
        '4',
        'invalid',
        '',
        '',
        'row is invalid; id: must be a number; owner_id: is required',
        '',
        '',
        "'-5",
        "'@x",
        'line one\nline two, "quoted"',
      ],
      [runId, '4', '6', 'succeeded', '504', '', '', '', '', '', '', ''],
    ]);
    // Unescaping the cells gives back exactly what was read from the source.
    expect(records[2]!.slice(9).map(unescapeCsvCell)).toEqual(['502', '=SUM(A1)', '+1']);
    expect(records[3]!.slice(9).map(unescapeCsvCell)).toEqual(['-5', '@x', 'line one\nline two, "quoted"']);
  });

  it('exports only failed and invalid rows when asked', async () => {
    const runId = await exportedRun();
    const { rows, records } = await exportCsv(runId, true);
    expect(rows).toBe(2);
    expect(records.slice(1).map((r) => [r[1], r[3]])).toEqual([
      ['2', 'failed'],
      ['3', 'invalid'],
    ]);
  });

  it('rejects an unknown run', async () => {
    await expect(writeResultsCsv(store, 'missing', new PassThrough())).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
  });

  it('waits for a slow destination instead of buffering everything', async () => {
    const run = await store.createRun({
      workspace: 'acme',
      operation: 'deal.update',
      source: 'big.csv',
      columns: ['id', 'name'],
    });
    const at = new Date().toISOString();
    const total = 3000;
    await store.addQueued(run.id, total);
    const batch: RowResult[] = [];
    for (let row = 1; row <= total; row++)
      batch.push({ row, status: 'failed', message: 'no', at, original: { id: String(row), name: 'n'.repeat(50) } });
    await store.recordResults(run.id, batch);
    let bytes = 0;
    let maxPending = 0;
    // A tiny high-water mark and an asynchronous write make the sink push back all the time.
    const slow = new Writable({
      highWaterMark: 256,
      write(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length;
        maxPending = Math.max(maxPending, slow.writableLength);
        setImmediate(callback);
      },
    });
    const { rows } = await writeResultsCsv(store, run.id, slow);
    expect(rows).toBe(total);
    expect(bytes).toBeGreaterThan(total * 50);
    // Had back-pressure been ignored, the whole export (~250 kB) would queue up in the sink.
    expect(maxPending).toBeLessThan(64 * 1024);
  });
});

describe('escapeCsvCell / unescapeCsvCell', () => {
  it('prefixes formula starts with a quote', () => {
    expect(['=SUM(A1)', '+1', '-5', '@x', '\tx', '\rx'].map(escapeCsvCell)).toEqual([
      "'=SUM(A1)",
      "'+1",
      "'-5",
      "'@x",
      "'\tx",
      "'\rx",
    ]);
    expect(['plain', '', '5-1', "'quoted", 'a=b'].map(escapeCsvCell)).toEqual(['plain', '', '5-1', "'quoted", 'a=b']);
  });

  it('round-trips every value, including ones that already start with a quote', () => {
    const values = ['=SUM(A1)', "'=SUM(A1)", "''+1", "'", "'plain", 'plain', '', '-', '@', "'@x"];
    for (const value of values) expect(unescapeCsvCell(escapeCsvCell(value))).toBe(value);
    expect(escapeCsvCell("'=SUM(A1)")).toBe("''=SUM(A1)");
    expect(unescapeCsvCell("'plain")).toBe("'plain");
  });
});
