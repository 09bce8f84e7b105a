import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import multipart from '@fastify/multipart';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { DEFAULTS, resolveSettings, type Resolved, type Secret } from '../config/index.js';
import type { Logger } from '../log/index.js';
import { PlanStore } from '../plans/index.js';
import type { Runtime } from '../runtime/index.js';
import { registerAuthHook } from './auth-hooks.js';
import { registerAuthThrottle, type AuthThrottle, type AuthThrottleOptions } from './auth-throttle.js';
import { mountBullBoard } from './bull-board.js';
import { registerErrorHandler } from './http-answers.js';
import { registerImportRoutes } from './import-routes.js';
import { ImportStore } from './import-store.js';
import { registerLoginRoutes } from './login-routes.js';
import { createMetricsRegistry } from './metrics-registry.js';
import { registerOpsRoutes } from './ops-routes.js';
import { registerPlanRoutes } from './plan-routes.js';
import { registerRunRoutes } from './run-routes.js';
import { registerUndoRoutes } from './undo-routes.js';
import { registerRunsRoutes } from './runs-routes.js';
import { registerSecurityHeaders } from './security-headers.js';
import { SessionAuth, checkTokenStrength } from './session-auth.js';
import { SessionStore } from './session-store.js';
import { registerUploadRoute } from './upload-route.js';
import { WorkLimiter, type WorkLimits } from './work-limiter.js';
import { registerWorkspaceRoutes } from './workspace-routes.js';
import { WorkspaceScope } from './workspace-scope.js';

export interface DashboardOptions {
  /** Connected Redis, run store and queues; owned by the caller (the dashboard never closes it). */
  runtime: Runtime;
  /** The dashboard token (at least 32 characters); null only with --insecure-no-auth (then every page is open). */
  token: Secret | null;
  /** Where errors are logged. Default runtime.logger. */
  logger?: Logger;
  /**
   * Serve only these workspaces (`dashboard -w`): their queues, and on every route only their
   * runs; any other run is 404. Default: every configured workspace's queue, and every run.
   */
  workspaces?: string[];
  /** Largest corrected CSV accepted for a retry. Default DEFAULTS.dashboard (50 MB). */
  maxUploadBytes?: number;
  /** Largest file a browser import takes (larger: the CLI). Default DEFAULTS.dashboard (200 MB). */
  maxImportBytes?: number;
  /** How often the files of expired or discarded browser imports are removed. Default a minute. */
  importSweepMs?: number;
  /** Runs per page on the runs page. Default DEFAULTS.dashboard (50). */
  runsPageSize?: number;
  /** Failed rows per page on a run page. Default DEFAULTS.dashboard (50). */
  problemsPageSize?: number;
  /** Absolute lifetime of a browser sign-in. Default DEFAULTS.dashboard (12 hours). */
  sessionTtlMs?: number;
  /** A sign-in unused this long ends. Default DEFAULTS.dashboard (30 minutes). */
  sessionIdleMs?: number;
  /** Wrong tokens a client may send per window before it gets 429s. Default 10 per 15 minutes. */
  authFailures?: AuthThrottleOptions;
  /**
   * fastify's trustProxy: which proxies' X-Forwarded-For/-Proto/-Host to believe (their
   * addresses/CIDRs, or true for any). Needed behind a TLS proxy for Secure cookies, HSTS, the
   * Origin check and per-client sign-in limits. Default false.
   */
  trustProxy?: FastifyServerOptions['trustProxy'];
  /** Problem rows one error-text search request looks through. Default DEFAULTS.dashboard (5,000). */
  searchScanRows?: number;
  /** Heavy requests served at once / waiting, per kind. */
  concurrency?: Partial<Record<'search' | 'export' | 'upload' | 'importTask', WorkLimits>>;
  /** How long /readyz waits for Redis. Default DEFAULTS.dashboard (2000 ms). */
  readyTimeoutMs?: number;
  /** Newest runs one runs-page text search looks through. Default DEFAULTS.dashboard (5,000). */
  searchScanRuns?: number;
  /** Problem rows the run page groups by cause (per change of the run's counts). Default DEFAULTS.dashboard (10,000). */
  groupScanRows?: number;
}

const DEFAULT_LIMITS: Record<'search' | 'export' | 'upload' | 'importTask', WorkLimits> = {
  search: { running: 2, waiting: 32 },
  export: { running: 4, waiting: 8 },
  upload: { running: 2, waiting: 2 },
  // An import's check or plan reads its whole file (a plan the CRM's list too), after its request.
  importTask: { running: 2, waiting: 0 },
};

/**
 * The retry dashboard as a fastify app, not yet listening: `app.inject` tests it black-box,
 * `app.listen` serves it.
 */
/** DashboardOptions with its settings resolved (buildDashboard, once). */
type DashboardSettings = Resolved<
  DashboardOptions,
  | 'maxUploadBytes'
  | 'maxImportBytes'
  | 'runsPageSize'
  | 'problemsPageSize'
  | 'sessionTtlMs'
  | 'sessionIdleMs'
  | 'readyTimeoutMs'
  | 'searchScanRuns'
  | 'searchScanRows'
  | 'groupScanRows'
>;

export async function buildDashboard(given: DashboardOptions): Promise<FastifyInstance> {
  const d = DEFAULTS.dashboard;
  const options: DashboardSettings = resolveSettings(given, {
    maxUploadBytes: d.maxUploadBytes,
    maxImportBytes: d.maxImportBytes,
    runsPageSize: d.runsPageSize,
    problemsPageSize: d.problemsPageSize,
    sessionTtlMs: d.sessionTtlMs,
    sessionIdleMs: d.sessionIdleMs,
    readyTimeoutMs: d.readyTimeoutMs,
    searchScanRuns: d.searchScanRuns,
    searchScanRows: d.searchScanRows,
    groupScanRows: d.groupScanRows,
  });
  const { runtime, maxUploadBytes } = options;
  const logger = options.logger ?? runtime.logger;
  if (options.token !== null) checkTokenStrength(options.token);
  const workspaces = options.workspaces ?? Object.keys(runtime.config.workspaces);
  const scope = new WorkspaceScope(options.workspaces ?? null);
  const auth = new SessionAuth(options.token);

  // Requests are not logged one by one: operators' clicks are not worth a line each.
  const app = Fastify({ logger: false, bodyLimit: 4 * 1024 * 1024, trustProxy: options.trustProxy ?? false });
  try {
    await setUp(app, options, { auth, scope, workspaces, maxUploadBytes, logger });
  } catch (err) {
    await app.close(); // the sign-in limiter's own Redis connection goes with it
    throw err;
  }
  return app;
}

interface SetUpContext {
  auth: SessionAuth;
  scope: WorkspaceScope;
  workspaces: string[];
  maxUploadBytes: number;
  logger: Logger;
}

async function setUp(app: FastifyInstance, options: DashboardSettings, ctx: SetUpContext): Promise<void> {
  const { runtime } = options;
  const { auth, scope, workspaces, maxUploadBytes, logger } = ctx;
  const limits = { ...DEFAULT_LIMITS, ...options.concurrency };
  await app.register(cookie, auth.insecure ? {} : { secret: auth.cookieSecret });
  await app.register(formbody);
  await app.register(multipart, { limits: { fileSize: maxUploadBytes, files: 1, fields: 20 } });

  let sessions: SessionStore | null = null;
  let throttle: AuthThrottle | null = null;
  if (!auth.insecure) {
    sessions = new SessionStore({
      redis: runtime.redis,
      prefix: runtime.config.prefix,
      fingerprint: auth.fingerprint,
      ttlMs: options.sessionTtlMs,
      idleMs: options.sessionIdleMs,
    });
    // A new token ends the sessions signed in with the old one.
    const revoked = await sessions.revokeOtherTokens();
    if (revoked > 0) logger.info({ revoked }, 'dashboard: the token changed; signed out the sessions of the old one');
    throttle = await registerAuthThrottle(app, {
      ...resolveSettings(options.authFailures ?? {}, {
        maxFailures: DEFAULTS.dashboard.authMaxFailures,
        windowMs: DEFAULTS.dashboard.authWindowMs,
      }),
      redis: runtime.config,
      prefix: runtime.config.prefix,
      logger,
    });
  }
  const deps = { auth, sessions, throttle };
  registerAuthHook(app, deps);
  registerErrorHandler(app, logger);
  registerSecurityHeaders(app);

  registerOpsRoutes(app, {
    runtime,
    registry: createMetricsRegistry({
      runtime,
      workspaces,
      ...(options.workspaces !== undefined ? { only: options.workspaces } : {}),
    }),
    readyTimeoutMs: options.readyTimeoutMs,
  });
  registerLoginRoutes(app, deps);
  const searches = new WorkLimiter('searches', limits.search);
  const downloads = new WorkLimiter('downloads', limits.export);
  registerRunsRoutes(app, {
    runtime,
    auth,
    scope,
    workspaces,
    pageSize: options.runsPageSize,
    searchScanRuns: options.searchScanRuns,
    limiter: searches,
  });
  registerRunRoutes(app, {
    runtime,
    auth,
    scope,
    pageSize: options.problemsPageSize,
    searchScanRows: options.searchScanRows,
    limits: { search: searches, export: downloads },
    groupScanRows: options.groupScanRows,
  });
  registerUndoRoutes(app, { runtime, auth, scope });
  const imports = new ImportStore(runtime.redis, runtime.config.prefix);
  const uploads = new WorkLimiter('uploads', limits.upload);
  registerPlanRoutes(app, {
    runtime,
    auth,
    scope,
    pageSize: options.problemsPageSize,
    listPageSize: options.runsPageSize,
    exports: downloads,
    searches,
    imports,
  });
  registerUploadRoute(app, { runtime, auth, scope, maxUploadBytes, limiter: uploads });
  registerImportRoutes(app, {
    runtime,
    auth,
    scope,
    workspaces,
    maxImportBytes: options.maxImportBytes,
    uploads,
    tasks: new WorkLimiter('import checks and plans', limits.importTask),
    downloads,
    imports,
    plans: new PlanStore({ redis: runtime.redis, prefix: runtime.config.prefix }),
    ...(options.importSweepMs !== undefined ? { sweepMs: options.importSweepMs } : {}),
  });
  registerWorkspaceRoutes(app, { runtime, auth, workspaces });
  await mountBullBoard(app, runtime, workspaces);
}
