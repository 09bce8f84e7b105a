import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import multipart from '@fastify/multipart';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Secret } from '../config/index.js';
import type { Logger } from '../log/index.js';
import type { Runtime } from '../runtime/index.js';
import { registerAuthHook } from './auth-hooks.js';
import { BULL_BOARD_PATH, mountBullBoard } from './bull-board.js';
import { registerErrorHandler } from './http-answers.js';
import { registerLoginRoutes } from './login-routes.js';
import { createMetricsRegistry } from './metrics-registry.js';
import { registerOpsRoutes } from './ops-routes.js';
import { registerRunRoutes } from './run-routes.js';
import { registerRunsRoutes } from './runs-routes.js';
import { SessionAuth } from './session-auth.js';
import { registerWorkspaceRoutes } from './workspace-routes.js';

export interface DashboardOptions {
  /** Connected Redis, run store and queues; owned by the caller (the dashboard never closes it). */
  runtime: Runtime;
  /** The dashboard token; null only with --insecure-no-auth (then every page is open). */
  token: Secret | null;
  /** Where errors are logged. Default runtime.logger. */
  logger?: Logger;
  /** Workspaces whose queues are shown and controlled. Default: every configured workspace. */
  workspaces?: string[];
  /** Largest corrected CSV accepted for a retry. Default 50 MB. */
  maxUploadBytes?: number;
  /** Runs per page on the runs page. Default 50. */
  runsPageSize?: number;
  /** Failed rows per page on a run page. Default 50. */
  problemsPageSize?: number;
  /** How long a browser sign-in lasts. Default 12 hours. */
  sessionTtlMs?: number;
  /** How long /readyz waits for Redis. Default 2000 ms. */
  readyTimeoutMs?: number;
}

const PAGE_CSP = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/**
 * The retry dashboard as a fastify app, not yet listening: `app.inject` tests it black-box,
 * `app.listen` serves it.
 */
export async function buildDashboard(options: DashboardOptions): Promise<FastifyInstance> {
  const { runtime } = options;
  const logger = options.logger ?? runtime.logger;
  const workspaces = options.workspaces ?? Object.keys(runtime.config.workspaces);
  const maxUploadBytes = options.maxUploadBytes ?? 50 * 1024 * 1024;
  const auth = new SessionAuth({ token: options.token, ...(options.sessionTtlMs !== undefined ? { sessionTtlMs: options.sessionTtlMs } : {}) });

  // Requests are not logged one by one: operators' clicks are not worth a line each.
  const app = Fastify({ logger: false, bodyLimit: 4 * 1024 * 1024 });
  await app.register(cookie);
  await app.register(formbody);
  await app.register(multipart, { limits: { fileSize: maxUploadBytes, files: 1, fields: 20 } });
  registerAuthHook(app, auth);
  registerErrorHandler(app, logger);

  app.addHook('onSend', async (request, reply, payload) => {
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Referrer-Policy', 'same-origin');
    reply.header('X-Frame-Options', 'DENY');
    // Bull Board brings its own scripts; our pages need nothing inline.
    if (!request.url.startsWith(BULL_BOARD_PATH)) reply.header('Content-Security-Policy', PAGE_CSP);
    if (String(reply.getHeader('content-type') ?? '').startsWith('text/html')) reply.header('Cache-Control', 'no-store');
    return payload;
  });

  registerOpsRoutes(app, {
    runtime,
    registry: createMetricsRegistry({ runtime, workspaces }),
    readyTimeoutMs: options.readyTimeoutMs ?? 2000,
  });
  registerLoginRoutes(app, auth);
  registerRunsRoutes(app, { runtime, auth, workspaces, pageSize: options.runsPageSize ?? 50 });
  registerRunRoutes(app, { runtime, auth, maxUploadBytes, pageSize: options.problemsPageSize ?? 50 });
  registerWorkspaceRoutes(app, { runtime, auth, workspaces });
  await mountBullBoard(app, runtime, workspaces);
  return app;
}
