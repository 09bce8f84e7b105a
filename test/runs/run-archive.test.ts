import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { archivePath, ArchivedRuns, durationWords, emptyCounts } from '../../src/runs/index.js';

/*
 * An archive written before a run's counters (producedRow, activeMs, passes) were always in its
 * record left them out at 0: read back, the record has them, so durations and resumes read it
 * as they read a run in Redis.
 */

const dir = mkdtempSync(join(tmpdir(), 'crm-sync-archive-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function writeArchive(runId: string, run: Record<string, unknown>): void {
  mkdirSync(join(dir, 'archive'), { recursive: true });
  const lines = [JSON.stringify({ run }), JSON.stringify({ row: 1, status: 'succeeded', at: run.createdAt })];
  writeFileSync(archivePath(dir, runId), gzipSync(`${lines.join('\n')}\n`));
}

const record = {
  workspace: 'acme',
  operation: 'deal.update',
  source: 'a.csv',
  status: 'completed',
  counts: { ...emptyCounts(), total: 1, succeeded: 1 },
  columns: ['id'],
  options: {},
  createdAt: '2026-03-02T10:00:00.000Z',
  finishedAt: '2026-03-02T10:00:00.400Z',
  producerDone: true,
};

describe('archived run records', () => {
  it('fill the counters an older archive left out at 0', async () => {
    writeArchive('old1', { id: 'old1', ...record });
    const run = await new ArchivedRuns(dir).requireRun('old1');
    expect(run).toMatchObject({ id: 'old1', producedRow: 0, activeMs: 0, passes: 0, counts: { succeeded: 1 } });
    expect(durationWords(run)).toBe('took 0.4 s');
  });

  it('keep the counters an archive holds', async () => {
    writeArchive('new1', {
      id: 'new1',
      ...record,
      producedRow: 1,
      activeMs: 100,
      passes: 1,
      passStartedAt: '2026-03-02T10:00:00.100Z',
    });
    const run = await new ArchivedRuns(dir).requireRun('new1');
    expect(run).toMatchObject({ producedRow: 1, activeMs: 100, passes: 1 });
    expect(durationWords(run)).toBe('active 0.4 s · wall 0.4 s · 2 passes (last 0.3 s)');
  });
});
