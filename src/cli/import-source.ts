// What `import` and `plan` read (a file, stdin spooled to a file, or a query), apart from
// import-action.ts so that `plan` does not load the queue and the workers.
import { CrmSyncError } from '../errors/index.js';
import { openFileSource, openQuerySource, openStdinSource, type Source } from '../ingest/index.js';
import type { SourceFormat } from '../ingest/index.js';
import { DEFAULT_DB_URL_ENV } from './options.js';

/** The options of `import` and `plan` that say what is read (import-command.ts, plan-command.ts). */
export interface ImportSourceOptions {
  format?: SourceFormat;
  delimiter?: string;
  fromPostgres?: boolean;
  query?: string;
  dbUrlEnv?: string;
  dbUrlFile?: string;
  rowKey?: string;
}

/**
 * What the command reads: a file, stdin spooled to a file (`-`), or a query. Arguments that do
 * not fit together are USAGE errors; the URL is read from its env variable or file here.
 */
export async function openImportSource(
  file: string | undefined,
  opts: ImportSourceOptions,
  resultsDir: string,
): Promise<Source> {
  const dbOptions = ['query', 'dbUrlEnv', 'dbUrlFile', 'rowKey'] as const;
  if (!opts.fromPostgres) {
    const stray = dbOptions.find((o) => opts[o] !== undefined);
    if (stray) throw new CrmSyncError('USAGE', `--${kebab(stray)} reads a database: add --from-postgres`);
    if (file === undefined)
      throw new CrmSyncError(
        'USAGE',
        'name the file to import, "-" for stdin, or read a database with --from-postgres',
      );
    const read = {
      ...(opts.format ? { format: opts.format } : {}),
      ...(opts.delimiter ? { delimiter: opts.delimiter } : {}),
    };
    if (file !== '-') return openFileSource(file, read);
    const format = opts.format ?? 'ndjson';
    const stdin = await openStdinSource(process.stdin, resultsDir, { ...read, format });
    process.stderr.write(`stdin (${format}) kept as ${stdin.label}: the run reads it from there\n`);
    return stdin;
  }
  if (file !== undefined)
    throw new CrmSyncError('USAGE', `--from-postgres reads rows from --query, not from ${JSON.stringify(file)}`);
  if (opts.query === undefined) throw new CrmSyncError('USAGE', '--from-postgres needs --query <sql>');
  if (opts.format !== undefined || opts.delimiter !== undefined)
    throw new CrmSyncError('USAGE', '--format and --delimiter are for files, not --from-postgres');
  if (opts.dbUrlEnv !== undefined && opts.dbUrlFile !== undefined)
    throw new CrmSyncError('USAGE', 'give --db-url-env or --db-url-file, not both');
  return openQuerySource(
    {
      ...(opts.dbUrlFile !== undefined ? { urlFile: opts.dbUrlFile } : { urlEnv: opts.dbUrlEnv ?? DEFAULT_DB_URL_ENV }),
      query: opts.query,
      ...(opts.rowKey !== undefined ? { keyColumn: opts.rowKey } : {}),
    },
    'database URL',
  );
}

function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}
