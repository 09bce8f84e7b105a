import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { DEFAULTS } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import { isProblem } from './result-codec.js';
import { decodeArchivedRun } from './run-codec.js';
import type { IterateResultsOptions, ProblemsQuery, RunStore } from './run-store.js';
import type { RowResult, RunRecord } from './run-types.js';
import { runNamesHash, runNamesOf, type RunNames } from './run-names.js';

/*
 * A run's archive: before retention removes a run from Redis, its record and every row's
 * result go to `<resultsDir>/archive/<runId>.ndjson.gz` — line 1 `{"run": …}`, then one
 * RowResult per line in row order — so `runs show` and `runs export` keep working from it.
 * Written to a temporary name and renamed, so a half-written archive is never taken for one.
 */

/** What reading a run's results needs: the run store, or an archived run. */
export interface RunResults {
  requireRun(id: string): Promise<RunRecord>;
  iterateResults(id: string, options?: IterateResultsOptions): AsyncIterable<RowResult>;
  /** The names its rows gave for the ids they sent (RunStore.names). */
  names(id: string): Promise<RunNames>;
  problems(id: string, query?: ProblemsQuery): Promise<{ rows: RowResult[]; total: number }>;
}

export function archiveDir(resultsDir: string): string {
  return join(resultsDir, 'archive');
}

/**
 * RUN_NOT_FOUND for a run neither in Redis nor archived here, saying where runs are listed
 * (as `apply` says where plans are).
 */
export function runNotFoundHere(resultsDir: string, runId: string): CrmSyncError {
  const dir = archiveDir(resultsDir);
  return new CrmSyncError(
    'RUN_NOT_FOUND',
    `no run with id ${runId} in Redis or archived under ${dir}; list the runs with: crm-sync runs list (archived runs are the files in ${dir})`,
  );
}

export function archivePath(resultsDir: string, runId: string): string {
  // Run ids are generated (run-id.ts); refuse anything that could leave the directory.
  if (!/^[\w-]+$/.test(runId)) throw new CrmSyncError('USAGE', `not a run id: ${runId}`);
  return join(archiveDir(resultsDir), `${runId}.ndjson.gz`);
}

/** Writes the run's archive from the store; answers its path and how many results it holds. */
export async function archiveRun(
  store: RunStore,
  runId: string,
  resultsDir: string,
): Promise<{ path: string; rows: number }> {
  const run = await store.requireRun(runId);
  mkdirSync(archiveDir(resultsDir), { recursive: true });
  const path = archivePath(resultsDir, runId);
  const partial = `${path}.partial`;
  let rows = 0;
  const names = runNamesHash(await store.names(runId));
  async function* lines(): AsyncGenerator<string> {
    // The names beside the record, as the hash keeps them (absent: the rows named nothing).
    yield `${JSON.stringify(Object.keys(names).length > 0 ? { run, names } : { run })}\n`;
    for await (const result of store.iterateResults(runId)) {
      rows++;
      yield `${JSON.stringify(result)}\n`;
    }
  }
  await writeWhole(path, partial, lines());
  return { path, rows };
}

/**
 * Writes an archive's lines gzipped to `partial` and renames it to `path`: a reader sees the
 * old archive or the new one, never half of one; a failed write leaves no partial file.
 */
async function writeWhole(path: string, partial: string, lines: AsyncIterable<string>): Promise<void> {
  try {
    await pipeline(Readable.from(lines), createGzip(), createWriteStream(partial));
    renameSync(partial, path);
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  }
}

/** Runs read back from their archives (the same reads as the store's, for the CLI). */
export class ArchivedRuns implements RunResults {
  constructor(private readonly resultsDir: string) {}

  has(runId: string): boolean {
    return existsSync(archivePath(this.resultsDir, runId));
  }

  async requireRun(runId: string): Promise<RunRecord> {
    for await (const line of this.#lines(runId)) return decodeArchivedRun((JSON.parse(line) as { run: unknown }).run);
    throw new CrmSyncError('RESULT_UNREADABLE', `the archive of run ${runId} is empty`);
  }

  async names(runId: string): Promise<RunNames> {
    for await (const line of this.#lines(runId)) {
      const { names } = JSON.parse(line) as { names?: Record<string, string> };
      return runNamesOf(names ?? {});
    }
    return {};
  }

  async *iterateResults(runId: string, options: IterateResultsOptions = {}): AsyncIterable<RowResult> {
    let first = true;
    for await (const line of this.#lines(runId)) {
      if (first) {
        first = false;
        continue;
      }
      const result = JSON.parse(line) as RowResult;
      if (!options.problemsOnly || isProblem(result.status)) yield result;
    }
  }

  /**
   * Names undo run `undoId` on archived run `runId` (RunRecord.undoneBy), as RunStore.linkUndo
   * does for a run in Redis: the archive is written anew beside it and renamed over it, so a
   * reader sees the old archive or the new one, never half of one. False when the run has no
   * archive here. Two undos of one archived run linking at the same instant may keep one link.
   */
  async linkUndo(runId: string, undoId: string): Promise<boolean> {
    if (!this.has(runId)) return false;
    const path = archivePath(this.resultsDir, runId);
    const partial = `${path}.${randomBytes(4).toString('hex')}.partial`;
    const lines = this.#lines(runId);
    async function* linked(): AsyncGenerator<string> {
      let first = true;
      for await (const line of lines) {
        if (first) {
          first = false;
          const head = JSON.parse(line) as { run: RunRecord; names?: Record<string, string> };
          const undoneBy = head.run.undoneBy ?? [];
          if (!undoneBy.includes(undoId)) head.run.undoneBy = [...undoneBy, undoId];
          yield `${JSON.stringify(head)}\n`;
        } else yield `${line}\n`;
      }
    }
    await writeWhole(path, partial, linked());
    return true;
  }

  async problems(runId: string, query: ProblemsQuery = {}): Promise<{ rows: RowResult[]; total: number }> {
    // Not a setting: a page without an offset starts at the first problem row.
    const offset = query.offset ?? 0;
    const limit = query.limit ?? DEFAULTS.runs.archivePageSize;
    const rows: RowResult[] = [];
    let total = 0;
    for await (const r of this.iterateResults(runId, { problemsOnly: true })) {
      if (total >= offset && rows.length < limit) rows.push(r);
      total++;
    }
    return { rows, total };
  }

  async *#lines(runId: string): AsyncIterable<string> {
    const path = archivePath(this.resultsDir, runId);
    if (!existsSync(path)) throw runNotFoundHere(this.resultsDir, runId);
    const lines = createInterface({ input: createReadStream(path).pipe(createGunzip()), crlfDelay: Infinity });
    for await (const line of lines) if (line !== '') yield line;
  }
}
