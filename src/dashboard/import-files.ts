import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import type { FastifyRequest } from 'fastify';
import { CrmSyncError } from '../errors/index.js';
import { openSource } from '../ingest/index.js';
import type { PlanStore } from '../plans/index.js';
import type { ImportStore } from './import-store.js';
import { receiveForm } from './multipart-form.js';

/*
 * An import's file on the dashboard's disk: `<resultsDir>/dashboard-imports/<workspace>/<id>/<name>`,
 * a directory no route serves (the dashboard serves only its own static assets, from memory).
 * It lives until the import's plan expires, or the import is discarded (sweepImportFiles).
 */

export const IMPORTS_DIR = 'dashboard-imports';
/** What the readers take, by extension (openSource's table). */
export const IMPORT_EXTENSIONS = ['.csv', '.tsv', '.ndjson', '.jsonl', '.json'] as const;
/** Values shown per column in the mapping table. */
export const SAMPLE_ROWS = 3;
/** A directory without a record is an upload that never became an import (a refused file): removed after this. */
const ORPHAN_AGE_MS = 3600 * 1000;

export function importDir(root: string, workspace: string, id: string): string {
  return join(root, workspace, id);
}

/** The file name as given, safe as a path segment (the name people see; its extension picks the reader). */
export function safeFileName(given: string): string {
  const name = basename(given.replace(/\\/g, '/'))
    .replace(/[^\w.\- ()]+/g, '_')
    .slice(-120);
  const ext = extname(name).toLowerCase();
  if (!(IMPORT_EXTENSIONS as readonly string[]).includes(ext))
    throw new CrmSyncError(
      'USAGE',
      `${JSON.stringify(given.slice(0, 120))} is not a CSV, NDJSON or JSON file: its name must end in ${IMPORT_EXTENSIONS.join(', ')}`,
    );
  return name === ext ? `file${ext}` : name;
}

export interface ReceivedImport {
  fields: Record<string, string>;
  fileName?: string;
  bytes: number;
}

/** Removes the server's paths from a message about the file: people see its name. */
export function withoutPaths(text: string, file: string, name: string): string {
  return text.split(file).join(name);
}

/**
 * Reads an import's form: its fields, and its one file streamed to `dir` under its own name (at
 * most `maxBytes`: INPUT_TOO_LARGE beyond, with the CLI named for larger files).
 */
export async function receiveImport(
  request: FastifyRequest,
  dir: string,
  maxBytes: number,
  tooLarge: string,
): Promise<ReceivedImport> {
  const { fields, file } = await receiveForm(request, {
    maxBytes,
    maxFields: 20,
    saveTo: async (given) => {
      if (given === '') return undefined;
      await mkdir(dir, { recursive: true });
      return join(dir, safeFileName(given));
    },
    words: {
      tooLarge,
      tooManyFiles: 'the upload holds more than one file: choose one file on the new import page',
      tooManyFields: 'the upload holds more form fields than the new import page sends: upload from that page',
      malformed: 'the upload is not a well-formed multipart/form-data body: send it from the form',
    },
  });
  if (file === undefined) return { fields, bytes: 0 };
  return { fields, fileName: basename(file.path), bytes: (await stat(file.path)).size };
}

/** The file's columns and the first values of each, read as the import will read it. */
export async function sampleColumns(
  path: string,
): Promise<{ columns: string[]; samples: Record<string, string[]>; rows: number }> {
  const reader = openSource(path);
  const samples: Record<string, string[]> = {};
  let rows = 0;
  for await (const item of reader) {
    if (item.kind === 'record') {
      for (const [column, value] of Object.entries(item.original)) {
        const list = (samples[column] ??= []);
        list.push(value);
      }
    }
    if (++rows >= SAMPLE_ROWS) break;
  }
  const columns = [...reader.columns];
  if (columns.length === 0) throw new CrmSyncError('INPUT_COLUMNS', 'the file has no columns (an empty file?)');
  return { columns, samples, rows };
}

/**
 * Removes import files whose time is over: the import's plan expired or was discarded, the
 * import was discarded or expired before it had a plan, or no record names the directory.
 * Returns how many directories went.
 */
export async function sweepImportFiles(
  root: string,
  imports: ImportStore,
  plans: PlanStore,
  now = Date.now(),
): Promise<number> {
  let removed = 0;
  const workspaces = await readdir(root).catch(() => [] as string[]);
  for (const workspace of workspaces) {
    const ids = await readdir(join(root, workspace)).catch(() => [] as string[]);
    for (const id of ids) {
      const dir = join(root, workspace, id);
      const record = await imports.get(workspace, id);
      let over: boolean;
      if (record === null) {
        const age = now - (await stat(dir).catch(() => ({ mtimeMs: now }))).mtimeMs;
        over = age > ORPHAN_AGE_MS;
      } else {
        const planId = record.plan?.planId;
        const plan = planId !== undefined ? await plans.get(planId) : null;
        over = record.discarded !== undefined || now >= record.expiresMs || plan?.status === 'discarded';
      }
      if (!over) continue;
      await rm(dir, { recursive: true, force: true });
      removed++;
      if (record !== null)
        await imports.update(workspace, id, (r) => {
          if (r.fileRemoved) return false;
          r.fileRemoved = true;
          return true;
        });
    }
  }
  return removed;
}
