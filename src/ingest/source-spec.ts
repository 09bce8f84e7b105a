import { readdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CrmSyncError } from '../errors/index.js';
import { FileSource } from './file-source.js';
import { openQuerySource } from './postgres-reader.js';
import type { QuerySourceSpec } from './source-types.js';
import type { Source } from './source.js';

/** How a sync definition names its source: a file path or glob, or `{ postgres: … }` (a query). */
export type SourceSpec = string | { postgres: QuerySourceSpec };

export interface SourceSpecContext {
  /** The sync whose definition holds the spec, named in messages. */
  syncName: string;
  /** The file the spec was read from, for a mistake in it. */
  file: string;
  /** Makes a relative path (a file, a glob, a URL file) absolute, e.g. against the definition's directory. */
  resolvePath(path: string): string;
}

/** A short text for the spec: the file path or glob, or the query's label (never the URL). */
export function sourceSpecText(spec: SourceSpec): string {
  if (typeof spec === 'string') return spec;
  const { urlEnv, urlFile, query } = spec.postgres;
  return `postgres (${urlEnv !== undefined ? `$${urlEnv}` : (urlFile ?? '')}): ${query.replace(/\s+/g, ' ').trim()}`;
}

/**
 * What a run of the spec reads: the newest file matching it, or its query opened on the
 * connection string read now from its env variable or file (SECRET_MISSING when it is not there).
 */
export function openSourceSpec(spec: SourceSpec, ctx: SourceSpecContext, env: NodeJS.ProcessEnv = process.env): Source {
  if (typeof spec === 'string') return new FileSource(specFile(spec, ctx));
  const { urlFile, ...rest } = spec.postgres;
  return openQuerySource(
    { ...rest, ...(urlFile !== undefined ? { urlFile: ctx.resolvePath(urlFile) } : {}) },
    `database URL of sync "${ctx.syncName}"`,
    env,
  );
}

/** The file the spec names now: itself, or the newest file matching its glob; USAGE for a query. */
export function resolveSpecFile(spec: SourceSpec, ctx: SourceSpecContext): string {
  if (typeof spec !== 'string')
    throw new CrmSyncError('USAGE', `sync ${ctx.syncName} reads a database query, not a file`);
  return specFile(spec, ctx);
}

function specFile(spec: string, ctx: SourceSpecContext): string {
  const path = ctx.resolvePath(spec);
  const name = basename(path);
  if (!/[*?]/.test(name)) return path;
  const dir = dirname(path);
  if (/[*?]/.test(dir))
    throw new CrmSyncError(
      'SYNC_DEFINITION_INVALID',
      `${ctx.file}: source: wildcards are allowed in the file name only`,
    );
  const re = globToRegExp(name);
  let newest: { path: string; mtime: number } | undefined;
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    entries = [];
  }
  for (const entry of entries) {
    if (!re.test(entry)) continue;
    const full = join(dir, entry);
    const st = statSync(full);
    if (st.isFile() && (!newest || st.mtimeMs > newest.mtime)) newest = { path: full, mtime: st.mtimeMs };
  }
  if (!newest) throw new CrmSyncError('INPUT_UNREADABLE', `sync ${ctx.syncName}: no file matches ${path}`);
  return newest.path;
}

function globToRegExp(pattern: string): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replaceAll('*', '[^/]*')
    .replaceAll('?', '[^/]');
  return new RegExp(`^${body}$`);
}
