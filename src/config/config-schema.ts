import { z } from 'zod';
import { DEFAULTS } from './defaults.js';

const W = DEFAULTS.workspace;

/** Workspace names become BullMQ queue names and Redis key parts, so they stay plain. */
export const WORKSPACE_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/i;

export const RateLimitSchema = z
  .object({
    /** Requests allowed per window. */
    max: z.number().int().positive(),
    /** Window length in milliseconds. */
    durationMs: z.number().int().positive(),
  })
  .strict();

export const WorkspaceFileSchema = z
  .object({
    /** The workspace's address + `/api/external`, e.g. `https://acme.crm.example/api/external`. */
    baseUrl: z.url({
      protocol: /^https?$/,
      error: 'must be an http(s) URL such as http://acme.localhost:4010/api/external',
    }),
    /** Name of the env variable holding the API key (this or apiKeyFile). */
    apiKeyEnv: z.string().min(1).optional(),
    /** Path of a file holding the API key (this or apiKeyEnv), e.g. a Docker secret. */
    apiKeyFile: z.string().min(1).optional(),
    /** The CRM's known rate limit for this key; unknown limits are found by backing off on 429. */
    rateLimit: RateLimitSchema.optional(),
    /** Retries of transient failures (5xx, timeouts, resets); 429s never count. */
    retry: z
      .object({
        /** Attempts per row in all. Default 6. */
        attempts: z.number().int().min(1).max(50).default(W.retry.attempts),
        /** First retry delay, doubled each attempt with 50% jitter. Default 1000 ms. */
        backoffMs: z.number().int().min(1).max(600_000).default(W.retry.backoffMs),
      })
      .strict()
      .default({ ...W.retry }),
    /** Which list API version to page (the spec's list examples use v1). Default v2. */
    listVersion: z.enum(['v1', 'v2']).default(W.listVersion),
    /**
     * Update rows carried by one queue job (sent one request each, in order, each with its own
     * token of the rate budget). Default 10. Creates always travel alone.
     */
    rowsPerJob: z.number().int().min(1).max(100).optional(),
    /**
     * After a create's answer was lost (timeout, dropped connection, 5xx), wait this long before
     * looking for the deal it may have made, so a request still held somewhere in the network
     * lands first. Above any proxy's or load balancer's queue time. Default 30000 ms.
     */
    createSettleMs: z.number().int().min(0).max(3_600_000).default(W.createSettleMs),
    /**
     * Deal fields the CRM's automation may set on a new deal (a workflow that marks deals won,
     * assigns an owner, moves a stage). A create whose answer was lost looks for a deal equal to
     * the row in every field it sent but these. Default none: every sent field must match.
     */
    automationFields: z.array(z.enum(['value', 'status', 'owner_id', 'stage_id', 'pipeline_id', 'tag_ids'])).optional(),
    /** Whole-request timeout of a CRM call; a write on the wire counts as applied 15 s after it. Default 15000 ms. */
    requestTimeoutMs: z.number().int().min(100).max(600_000).default(W.requestTimeoutMs),
    /**
     * Circuit breaker: when requests keep failing because of where they go (connection refused,
     * DNS, a baseUrl that does not answer like the CRM), the workspace is held instead of
     * spending rows, and probed until the CRM answers.
     */
    /**
     * Requests failing this long with no success between is logged as one warning, with counts
     * (requests failed, rows waiting), and its end as one line. Default 30000 ms.
     */
    outageWarningMs: z.number().int().min(1000).max(86_400_000).default(W.outageWarningMs),
    /**
     * Change control: `crm-sync apply` refuses a plan that nobody approved (`crm-sync plans
     * approve`, or the dashboard). Default false.
     */
    requireApproval: z.boolean().default(W.requireApproval),
    /** How long a stored plan can be approved and applied (ms). Default 86400000 (24 h). */
    planTtlMs: z
      .number()
      .int()
      .min(1000)
      .max(30 * 86_400_000)
      .default(W.planTtlMs),
    /**
     * Apply's drift check reads the CRM's list again once its last read is this old (ms): the
     * longest a record may be edited unseen before a planned write lands. Default 10000 ms.
     */
    driftMaxAgeMs: z.number().int().min(0).max(3_600_000).default(W.driftMaxAgeMs),
    /**
     * A plain import's update reads its record's values before the write from list pages (in the
     * rate budget), so `runs undo` can put them back. Default true.
     */
    readBefore: z.boolean().default(W.readBefore),
    /**
     * A plain import's before-values come from a list pass at most this old (or 20 × its
     * duration): a value written in that window before the row's write is not what undo puts
     * back. Default 60000 ms.
     */
    beforeMaxAgeMs: z.number().int().min(0).max(3_600_000).default(W.beforeMaxAgeMs),
    /**
     * Names in a mapping (`"by": "name"`) resolve from what the workspace's list pages showed,
     * kept in Redis; a pass older than this is read again first (ms). Default 3600000 (1 h).
     */
    referencesMaxAgeMs: z
      .number()
      .int()
      .min(0)
      .max(7 * 86_400_000)
      .default(W.referencesMaxAgeMs),
    breaker: z
      .object({
        /** Unreachable failures in a row (no success between) that hold the workspace. Default 5. */
        threshold: z.number().int().min(1).max(1000).default(W.breaker.threshold),
        /** How often a held workspace is probed with a one-record list. Default 15000 ms. */
        probeEveryMs: z.number().int().min(100).max(3_600_000).default(W.breaker.probeEveryMs),
      })
      .strict()
      .default({ ...W.breaker }),
  })
  .strict()
  .refine((w) => (w.apiKeyEnv === undefined) !== (w.apiKeyFile === undefined), {
    message: 'set exactly one of apiKeyEnv (name of an env variable) or apiKeyFile (path of a file)',
  });

/**
 * Rows per job (DEFAULTS.workspace.rowsPerJob). The rate budget counts requests, so a known
 * limit does not change this.
 */
export const DEFAULT_ROWS_PER_JOB = W.rowsPerJob;

export const ConfigFileSchema = z
  .object({
    /** The JSON Schema an editor checks the file against (schema/crm-sync.config.schema.json); crm-sync ignores it. */
    $schema: z.string().optional(),
    /** Redis connection URL. REDIS_URL in the environment wins. Default redis://127.0.0.1:6379. */
    redisUrl: z.string().min(1).optional(),
    /**
     * A Redis Cluster instead of one Redis (docs/architecture.md, "Redis Cluster"): seed nodes
     * `host:port` (any few masters or replicas; the rest is discovered). REDIS_CLUSTER_NODES in the
     * environment wins over these nodes and over REDIS_URL; with either, nothing falls back to a
     * single Redis.
     */
    redisCluster: z
      .object({
        nodes: z
          .array(z.string().regex(/^[^\s:]+:\d{1,5}$/, 'a seed node is host:port'))
          .min(1)
          .optional(),
        /** ACL user, when the cluster has one for crm-sync. */
        username: z.string().min(1).optional(),
        /** Env variable holding the password (preferred over `password`: the file then holds no secret). */
        passwordEnv: z.string().min(1).optional(),
        password: z.string().min(1).optional(),
        /** TLS to every node (a managed Redis in cluster mode usually needs it). Default false. */
        tls: z.boolean().optional(),
      })
      .strict()
      .optional(),
    workspaces: z
      .record(z.string(), WorkspaceFileSchema)
      // zod reports a failed record key as "Invalid key in record"; check names here to say why.
      .superRefine((workspaces, ctx) => {
        for (const name of Object.keys(workspaces)) {
          if (!WORKSPACE_NAME.test(name)) {
            ctx.addIssue({
              code: 'custom',
              path: [name],
              message: 'workspace names use letters, digits, - and _ only (max 63)',
            });
          }
        }
      })
      .default({}),
    dashboard: z
      .object({
        /** Env variable holding the dashboard token. Default CRM_SYNC_DASHBOARD_TOKEN. */
        tokenEnv: z.string().min(1).optional(),
        /** File holding the dashboard token. */
        tokenFile: z.string().min(1).optional(),
      })
      .strict()
      .optional(),
    /**
     * History that outlives Redis: every applied field change is also written, in batches, to a
     * PostgreSQL table crm-sync creates (CRM_SYNC_HISTORY_URL sets or overrides the URL). Default
     * none: history lives with the runs in Redis and their archives.
     */
    history: z
      .object({
        postgresUrl: z.string().min(1).optional(),
        /** Default crm_sync_history; `schema.table` allowed. */
        table: z
          .string()
          .regex(/^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$/i)
          .optional(),
      })
      .strict()
      .optional(),
    /** Directory where exports (failed-row CSVs) are written. Default ./crm-sync-results. */
    resultsDir: z.string().min(1).optional(),
    /**
     * How long ended runs stay in Redis: older ones are archived to a compressed results file
     * under resultsDir/archive and removed by the workers' housekeeping (and `runs prune`);
     * failed-rows files in resultsDir older than this are removed too. Default 30 days.
     */
    retention: z.object({ days: z.number().positive() }).strict().optional(),
  })
  .strict();

export type ConfigFile = z.infer<typeof ConfigFileSchema>;
export type WorkspaceFile = z.infer<typeof WorkspaceFileSchema>;
export type RateLimit = z.infer<typeof RateLimitSchema>;
