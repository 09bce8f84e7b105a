import { readdirSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';
import { CrmSyncError } from '../errors/index.js';
import {
  openSourceSpec,
  resolveSpecFile,
  sourceSpecText,
  type Source,
  type SourceSpecContext,
} from '../ingest/index.js';
import { RECONCILE_OPERATIONS } from '../reconcile/index.js';

/** Sync names become BullMQ scheduler ids and Redis key parts. */
export const SYNC_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/i;

const CRON_FIELD = /^[\d*,/\-?LW#A-Za-z]+$/;
function cronLooksValid(cron: string): boolean {
  const fields = cron.trim().split(/\s+/);
  return (fields.length === 5 || fields.length === 6) && fields.every((f) => CRON_FIELD.test(f));
}

function timezoneExists(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * A database view or query as a sync's source. The connection string comes from an env
 * variable or a file, as a workspace's API key does: the definition never holds it.
 */
export const PostgresSourceSchema = z
  .strictObject({
    /** Env variable holding the connection string (postgres://user:password@host:port/db). This or urlFile. */
    urlEnv: z.string('must be text').min(1, 'must not be empty').optional(),
    /** File holding the connection string (e.g. a Docker secret), relative to this definition's directory. This or urlEnv. */
    urlFile: z.string('must be text').min(1, 'must not be empty').optional(),
    /** The SELECT whose rows are synced; it runs read-only, read through a cursor. */
    query: z.string('must be text').trim().min(1, 'must not be empty'),
    /** Column whose value names each row in results, exports and retries (instead of a row number). Default none. */
    keyColumn: z.string('must be text').min(1, 'must not be empty').optional(),
  })
  .refine((p) => (p.urlEnv === undefined) !== (p.urlFile === undefined), {
    message: 'set exactly one of urlEnv (name of an env variable) or urlFile (path of a file)',
  });

/**
 * Limits on what one tick may change (issue 33, item 5). A tick whose plan goes over either is
 * not applied: it is recorded as held, with why, and the notify URL is told (sync-guard.ts).
 */
export const SyncGuardSchema = z
  .strictObject({
    /** Hold the tick when more than this share (0–1) of the source's rows would write (update or create). */
    maxChangedShare: z.number('must be a number').min(0, 'must be 0 or more').max(1, 'must be 1 or less').optional(),
    /** Hold the tick when more than this many rows would empty a field (a blank cell of an `"emptyCells": "clear"` column). */
    maxCleared: z.number('must be a number').int('must be a whole number').min(0, 'must be 0 or more').optional(),
  })
  .refine((g) => g.maxChangedShare !== undefined || g.maxCleared !== undefined, {
    message: 'set maxChangedShare, maxCleared or both',
  });
export type SyncGuard = z.infer<typeof SyncGuardSchema>;

export const SyncDefinitionSchema = z.strictObject({
  /** Unique among the definitions; the scheduler id and the `runs list --sync` filter. */
  name: z
    .string('must be text')
    .regex(SYNC_NAME, 'must use letters, digits, - and _ only (max 63), starting with a letter or digit'),
  /** A workspace from the config. */
  workspace: z.string('must be text').min(1, 'must not be empty'),
  /** deal.update, lead.update, contact.update, or deal.upsert (update by key, create what is missing). */
  operation: z.enum(RECONCILE_OPERATIONS, `must be one of ${RECONCILE_OPERATIONS.join(', ')}`),
  /**
   * File path or glob (`*`, `?` in the file name; the newest match wins), relative to this
   * definition's directory; or `{ "postgres": { "urlEnv", "query", "keyColumn" } }`.
   */
  source: z.union(
    [
      z.string().min(1, 'must not be empty'),
      z.strictObject({ postgres: PostgresSourceSchema }, 'must be a file path or glob, or { "postgres": { … } }'),
    ],
    'must be a file path or glob, or { "postgres": { "urlEnv": …, "query": … } }',
  ),
  /** Mapping file, relative to this definition's directory. Default: columns named like the API fields. */
  mapping: z.string('must be a file path').min(1, 'must not be empty').optional(),
  /** Default: email (contacts, leads), unique_number (deal.update), name (deal.upsert). */
  matchKey: z.string('must be text').min(1, 'must not be empty').optional(),
  /** Source column of the key. Default: the column mapped to the key's field, else one named like it. */
  keyColumn: z.string('must be text').min(1, 'must not be empty').optional(),
  schedule: z.strictObject({
    /** 5 or 6 field cron pattern, e.g. "0 2 * * *". */
    cron: z
      .string('must be a cron pattern')
      .refine(cronLooksValid, 'must be a cron pattern of 5 or 6 fields, e.g. "0 2 * * *"'),
    /** IANA time zone of the pattern. Default UTC. */
    timezone: z
      .string('must be an IANA time zone')
      .refine(timezoneExists, 'is not a known IANA time zone (e.g. Europe/Berlin)')
      .default('UTC'),
  }),
  /** Default: none — every tick is applied. */
  guard: SyncGuardSchema.optional(),
  /**
   * "guard" (default): a tick is held only when it goes over its guard; "always": every tick
   * is planned and held, nothing is sent by the schedule itself.
   */
  approval: z.enum(['guard', 'always'], 'must be "guard" or "always"').default('guard'),
  options: z
    .strictObject({
      /** Plan and record only, send nothing. Default false. */
      dryRun: z.boolean('must be true or false').default(false),
      /** Abort the run (status failed, remaining rows not sent) once this many rows failed. Default: never. */
      maxFailures: z.number('must be a number').int('must be a whole number').min(1, 'must be 1 or more').optional(),
      /** POST the run summary as JSON here. Default: none. */
      notifyUrl: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
    })
    .default({ dryRun: false }),
});

export type SyncDefinitionInput = z.input<typeof SyncDefinitionSchema>;

/** A validated definition and where it came from (relative paths resolve against `dir`). */
export type SyncDefinition = z.infer<typeof SyncDefinitionSchema> & { file: string; dir: string };

function fail(file: string, message: string): never {
  throw new CrmSyncError('SYNC_DEFINITION_INVALID', `${file}: ${message}`);
}

/** Reads and validates one definition file; errors name the file and the field. */
export function loadDefinitionFile(path: string): SyncDefinition {
  const file = resolve(path);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    fail(
      path,
      (err as NodeJS.ErrnoException).code === 'ENOENT'
        ? 'the file does not exist'
        : `not valid JSON (${(err as Error).message})`,
    );
  }
  const parsed = SyncDefinitionSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 5).map((i) => {
      const where = i.path.map(String).join('.');
      if (i.code === 'unrecognized_keys') return `${where ? `${where}: ` : ''}unknown field(s) ${i.keys.join(', ')}`;
      return `${where || '(definition)'}: ${i.message}`;
    });
    fail(path, issues.join('; '));
  }
  return { ...parsed.data, file, dir: dirname(file) };
}

/** Every `*.json` in `dir`, validated; names must be unique. A missing directory has none. */
export function loadDefinitions(dir: string): SyncDefinition[] {
  let names: string[];
  try {
    names = readdirSync(dir)
      .filter((n) => n.endsWith('.json'))
      .sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const defs = names.map((n) => loadDefinitionFile(join(dir, n)));
  const seen = new Map<string, string>();
  for (const d of defs) {
    const other = seen.get(d.name);
    if (other !== undefined) fail(d.file, `name: "${d.name}" is already used by ${other}`);
    seen.set(d.name, d.file);
  }
  return defs;
}

export function findDefinition(dir: string, name: string): SyncDefinition {
  const def = loadDefinitions(dir).find((d) => d.name === name);
  if (!def) throw new CrmSyncError('SYNC_NOT_FOUND', `no sync definition named "${name}" in ${dir}`);
  return def;
}

export function resolvePath(def: SyncDefinition, path: string): string {
  return isAbsolute(path) ? path : resolve(def.dir, path);
}

/** How the spec functions find the definition's files and name it in messages. */
function specContext(def: SyncDefinition): SourceSpecContext {
  return { syncName: def.name, file: def.file, resolvePath: (path) => resolvePath(def, path) };
}

/** A short text for the source: the file path or glob, or the query's label (never the URL). */
export function sourceText(def: SyncDefinition): string {
  return sourceSpecText(def.source);
}

/**
 * What a run of the sync reads: the newest file matching its source, or its query opened on
 * the connection string read now from its env variable or file (SECRET_MISSING when it is not there).
 */
export function openSyncSource(def: SyncDefinition, env: NodeJS.ProcessEnv = process.env): Source {
  return openSourceSpec(def.source, specContext(def), env);
}

/** The file a run reads: the source itself, or the newest file matching its glob. */
export function resolveSource(def: SyncDefinition): string {
  return resolveSpecFile(def.source, specContext(def));
}
