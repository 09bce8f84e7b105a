import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { CrmSyncError } from '../errors/index.js';
import { FileSource } from './file-source.js';
import type { ReadSourceOptions, SourceFormat } from './source-types.js';

/** Under resultsDir: where `import -` keeps what it read, so the run's source is a file like any other. */
export const STDIN_SPOOL_DIR = 'stdin';

const EXTENSION: Record<SourceFormat, string> = { csv: 'csv', ndjson: 'ndjson', json: 'json' };

/**
 * Copies a stream (stdin) to a file of its own under `resultsDir/stdin`, named by the time and
 * a random part, and returns its path. A pipe can be read once; a run's resume, retry with a
 * corrected file and verify read its source again, so the run reads this copy instead. The
 * copy streams to disk (bounded memory), and retention removes it with the run's files. A
 * failed copy is removed and thrown as INPUT_UNREADABLE.
 */
export async function spoolStdin(
  input: NodeJS.ReadableStream,
  resultsDir: string,
  format: SourceFormat,
): Promise<string> {
  const dir = join(resultsDir, STDIN_SPOOL_DIR);
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const path = join(dir, `stdin-${stamp}-${randomBytes(3).toString('hex')}.${EXTENSION[format]}`);
  try {
    // 0600: piped data may be personal data, readable by its owner only.
    await pipeline(input, createWriteStream(path, { mode: 0o600 }));
  } catch (err) {
    rmSync(path, { force: true });
    throw new CrmSyncError('INPUT_UNREADABLE', `could not read stdin into ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  return path;
}

/**
 * stdin as a Source: spooled to a file first (spoolStdin), which the run then reads like any
 * other file. Closed unused (no run reads it), the copy is removed.
 */
export async function openStdinSource(
  input: NodeJS.ReadableStream,
  resultsDir: string,
  options: ReadSourceOptions & { format: SourceFormat },
): Promise<FileSource> {
  return new FileSource(await spoolStdin(input, resultsDir, options.format), options, true);
}
