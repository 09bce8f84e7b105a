import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { z } from 'zod';
import { CrmSyncError } from '../errors/index.js';
import { ConfigFileSchema, type ConfigFile, type RateLimit } from './config-schema.js';
import { DEFAULTS } from './defaults.js';
import { Secret } from './secret.js';

export const DEFAULT_CONFIG_FILE = DEFAULTS.config.file;
export const DEFAULT_REDIS_URL = DEFAULTS.config.redisUrl;
export const DEFAULT_PREFIX = DEFAULTS.config.prefix;

export type ApiKeySource = { env: string } | { file: string };

export interface WorkspaceConfig {
  name: string;
  baseUrl: string;
  apiKeySource: ApiKeySource;
  rateLimit?: RateLimit;
  retry: { attempts: number; backoffMs: number };
  listVersion: 'v1' | 'v2';
  /** Update rows per queue job. */
  rowsPerJob: number;
  /** Wait before looking for a create whose answer was lost (ms). */
  createSettleMs: number;
  /** Deal fields the CRM's automation may set on a new deal: not compared when looking for a lost create's deal. */
  automationFields: string[];
  /** Whole-request timeout of a CRM call (ms). */
  requestTimeoutMs: number;
  /** Circuit breaker: unreachable failures in a row that hold the workspace, and its probe period (ms). */
  breaker: { threshold: number; probeEveryMs: number };
  /** The CRM failing this long (ms) with no success is one warning with counts. */
  outageWarningMs: number;
  /** `crm-sync apply` refuses unapproved plans. */
  requireApproval: boolean;
  /** A plan's life (ms). */
  planTtlMs: number;
  /** Apply's drift check reads the list again once its last read is this old (ms). */
  driftMaxAgeMs: number;
  /** A plain import's update reads its before-values from list pages (for `runs undo`). */
  readBefore: boolean;
  /** A plain import's before-values come from a list pass at most this old (ms). */
  beforeMaxAgeMs: number;
  /** Names resolve from list passes younger than this (ms); an older one is read again. */
  referencesMaxAgeMs: number;
}

/** A Redis Cluster to use instead of `redisUrl` (REDIS_CLUSTER_NODES or `redisCluster`). */
export interface RedisClusterConfig {
  nodes: Array<{ host: string; port: number }>;
  username?: string;
  /** The password, read when connecting (env variable), or given in the file. */
  password?: ApiKeySource | Secret;
  tls: boolean;
}

export interface Config {
  /** Where the config came from, or null when none was found and defaults apply. */
  source: string | null;
  /** The one Redis; unused when `redisCluster` is set. */
  redisUrl: string;
  /** Set: every process talks to this Redis Cluster (src/redis). */
  redisCluster: RedisClusterConfig | null;
  /** Redis key prefix for queues and run data; tests set their own to stay apart. */
  prefix: string;
  logLevel: string;
  resultsDir: string;
  /** Ended runs older than this are archived and removed from Redis (see ConfigFileSchema). */
  retention: { days: number };
  workspaces: Record<string, WorkspaceConfig>;
  dashboardTokenSource: ApiKeySource;
  /** The PostgreSQL history (config `history`, CRM_SYNC_HISTORY_URL); absent: none. */
  history?: { postgresUrl: string; table: string };
}

export interface LoadConfigOptions {
  /** `--config <path>`; wins over CRM_SYNC_CONFIG and the default file. */
  path?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/** Reads and validates the config: `--config`, else CRM_SYNC_CONFIG, else ./crm-sync.config.json. */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const explicit = options.path ?? env.CRM_SYNC_CONFIG;
  const path = resolve(cwd, explicit ?? DEFAULT_CONFIG_FILE);
  if (!existsSync(path)) {
    if (explicit !== undefined) {
      throw new CrmSyncError(
        'CONFIG_NOT_FOUND',
        `config file ${path} does not exist (from ${options.path ? '--config' : 'CRM_SYNC_CONFIG'})`,
      );
    }
    return configFromObject({}, { source: null, env, baseDir: cwd });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new CrmSyncError('CONFIG_INVALID', `${path}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  return configFromObject(raw, { source: path, env, baseDir: dirname(path) });
}

/** Validates an already-parsed config object (used by loadConfig, the demo and tests). */
export function configFromObject(
  raw: unknown,
  options: { source: string | null; env?: NodeJS.ProcessEnv; baseDir?: string },
): Config {
  const env = options.env ?? process.env;
  const baseDir = options.baseDir ?? process.cwd();
  const parsed = ConfigFileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new CrmSyncError('CONFIG_INVALID', formatIssues(options.source ?? 'config', parsed.error));
  }
  const file = parsed.data;
  const workspaces: Record<string, WorkspaceConfig> = {};
  for (const [name, w] of Object.entries(file.workspaces)) {
    workspaces[name] = {
      name,
      baseUrl: w.baseUrl.replace(/\/+$/, ''),
      apiKeySource: w.apiKeyEnv !== undefined ? { env: w.apiKeyEnv } : { file: resolve(baseDir, w.apiKeyFile ?? '') },
      ...(w.rateLimit ? { rateLimit: w.rateLimit } : {}),
      retry: w.retry,
      listVersion: w.listVersion,
      rowsPerJob: w.rowsPerJob ?? DEFAULTS.workspace.rowsPerJob,
      createSettleMs: w.createSettleMs,
      automationFields: w.automationFields ?? [],
      requestTimeoutMs: w.requestTimeoutMs,
      breaker: w.breaker,
      outageWarningMs: w.outageWarningMs,
      requireApproval: w.requireApproval,
      planTtlMs: w.planTtlMs,
      driftMaxAgeMs: w.driftMaxAgeMs,
      readBefore: w.readBefore,
      beforeMaxAgeMs: w.beforeMaxAgeMs,
      referencesMaxAgeMs: w.referencesMaxAgeMs,
    };
  }
  const dash = file.dashboard;
  return {
    source: options.source,
    redisUrl: env.REDIS_URL ?? file.redisUrl ?? DEFAULT_REDIS_URL,
    redisCluster: clusterConfig(file.redisCluster, env.REDIS_CLUSTER_NODES),
    prefix: keyPrefix(env.CRM_SYNC_PREFIX),
    logLevel: env.CRM_SYNC_LOG_LEVEL ?? env.LOG_LEVEL ?? DEFAULTS.config.logLevel,
    resultsDir: resolve(baseDir, file.resultsDir ?? DEFAULTS.config.resultsDir),
    retention: file.retention ?? { days: DEFAULTS.retention.days },
    workspaces,
    ...historyOf(file.history, env.CRM_SYNC_HISTORY_URL),
    dashboardTokenSource: dash?.tokenFile
      ? { file: resolve(baseDir, dash.tokenFile) }
      : { env: dash?.tokenEnv ?? DEFAULTS.config.dashboardTokenEnv },
  };
}

function historyOf(
  file: { postgresUrl?: string | undefined; table?: string | undefined } | undefined,
  envUrl: string | undefined,
): { history?: { postgresUrl: string; table: string } } {
  const postgresUrl = envUrl !== undefined && envUrl !== '' ? envUrl : file?.postgresUrl;
  if (postgresUrl === undefined) return {};
  return { history: { postgresUrl, table: file?.table ?? DEFAULTS.history.table } };
}

/**
 * CRM_SYNC_PREFIX, checked: braces would make it a hash tag of its own and put every workspace
 * in one Cluster slot (src/keys), and a space or `*` would break the key patterns SCAN uses.
 */
function keyPrefix(value: string | undefined): string {
  if (value === undefined) return DEFAULT_PREFIX;
  if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]*$/.test(value))
    throw new CrmSyncError(
      'CONFIG_INVALID',
      `CRM_SYNC_PREFIX "${value}" may hold letters, digits, _ . : and - only (no braces: the workspace is the hash tag)`,
    );
  return value;
}

/** REDIS_CLUSTER_NODES (`host:port,host:port`) wins over the file's nodes; null when neither names any. */
function clusterConfig(file: ConfigFile['redisCluster'], envNodes: string | undefined): RedisClusterConfig | null {
  const listed = envNodes?.trim() ? envNodes.split(',').map((n) => n.trim()) : file?.nodes;
  if (listed === undefined || listed.length === 0) {
    if (file !== undefined)
      throw new CrmSyncError(
        'CONFIG_INVALID',
        'redisCluster names no seed nodes: give "nodes": ["host:port", …] or set REDIS_CLUSTER_NODES',
      );
    return null;
  }
  const nodes = listed.map((node) => {
    const m = /^(\[[^\]]+\]|[^\s:]+):(\d{1,5})$/.exec(node);
    const port = Number(m?.[2]);
    if (!m || port < 1 || port > 65535)
      throw new CrmSyncError(
        'CONFIG_INVALID',
        `Redis Cluster seed node "${node}" is not host:port (REDIS_CLUSTER_NODES=10.0.0.1:6379,10.0.0.2:6379)`,
      );
    return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
  });
  if (file?.password !== undefined && file.passwordEnv !== undefined)
    throw new CrmSyncError('CONFIG_INVALID', 'redisCluster: give password or passwordEnv, not both');
  const password =
    file?.passwordEnv !== undefined
      ? { env: file.passwordEnv }
      : file?.password !== undefined
        ? new Secret(file.password)
        : undefined;
  return {
    nodes,
    ...(file?.username !== undefined ? { username: file.username } : {}),
    ...(password !== undefined ? { password } : {}),
    tls: file?.tls ?? false,
  };
}

/** The named workspace, or a WORKSPACE_UNKNOWN error that lists the ones configured. */
export function getWorkspace(config: Config, name: string): WorkspaceConfig {
  const ws = config.workspaces[name];
  if (!ws) {
    const known = Object.keys(config.workspaces);
    throw new CrmSyncError(
      'WORKSPACE_UNKNOWN',
      `workspace "${name}" is not configured${config.source ? ` in ${config.source}` : ''}; ` +
        (known.length ? `configured: ${known.join(', ')}` : `add it under "workspaces" in ${DEFAULT_CONFIG_FILE}`),
    );
  }
  return ws;
}

/** Reads a secret from its env variable or file. The error names the source, never a value. */
export function readSecret(source: ApiKeySource, what: string, env: NodeJS.ProcessEnv = process.env): Secret {
  if ('env' in source) {
    const value = env[source.env]?.trim();
    if (!value) throw new CrmSyncError('SECRET_MISSING', `${what}: env variable ${source.env} is not set`);
    return new Secret(value);
  }
  let value: string;
  try {
    value = readFileSync(source.file, 'utf8').trim();
  } catch (err) {
    throw new CrmSyncError(
      'SECRET_MISSING',
      `${what}: cannot read ${source.file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  if (!value) throw new CrmSyncError('SECRET_MISSING', `${what}: ${source.file} is empty`);
  return new Secret(value);
}

/** The API key of a workspace, read when needed so commands that send nothing never need it. */
export function readApiKey(ws: WorkspaceConfig, env: NodeJS.ProcessEnv = process.env): Secret {
  return readSecret(ws.apiKeySource, `API key of workspace "${ws.name}"`, env);
}

function formatIssues(source: string, error: z.ZodError): string {
  const lines = error.issues.map((issue) => {
    const where = issue.path.length ? issue.path.join('.') : '(top level)';
    return `  ${where}: ${issue.message}`;
  });
  return `${source} is invalid:\n${lines.join('\n')}`;
}
