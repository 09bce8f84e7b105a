import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RunStatus } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { formTokenFor } from './auth-hooks.js';
import { intParam, sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import { runsPageBody, type RunsFilter } from './runs-page.js';
import type { SessionAuth } from './session-auth.js';
import type { WorkspaceScope } from './workspace-scope.js';

export interface RunsRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  scope: WorkspaceScope;
  workspaces: string[];
  /** Runs per page. */
  pageSize: number;
}

const STATUSES = new Set<string>(['running', 'blocked', 'completed', 'failed']);

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim() !== '' ? value.trim().slice(0, 200) : undefined;
}

export function registerRunsRoutes(app: FastifyInstance, options: RunsRoutesOptions): void {
  const { runtime, auth, scope, pageSize } = options;

  app.get('/', async (request: FastifyRequest<{ Querystring: Record<string, string | undefined> }>, reply) => {
    const q = request.query;
    const status = q.status !== undefined && STATUSES.has(q.status) ? (q.status as RunStatus) : undefined;
    const workspace = text(q.workspace);
    const sync = text(q.sync);
    const filter: RunsFilter = { page: intParam(q.page, 1), ...(status ? { status } : {}), ...(workspace ? { workspace } : {}), ...(sync ? { sync } : {}) };
    const { runs, total } = await scope.listRuns(runtime.store, {
      offset: (filter.page - 1) * pageSize,
      limit: pageSize,
      ...(status ? { status } : {}),
      ...(workspace ? { workspace } : {}),
      ...(sync ? { syncName: sync } : {}),
    });
    if (wantsJson(request)) return { total, runs };
    const body = runsPageBody({ runs, total, pageSize, filter, workspaces: options.workspaces });
    const anyRunning = runs.some((r) => r.status === 'running');
    return sendPage(
      reply,
      page({ title: 'Runs', body, nav: 'runs', canSignOut: !auth.insecure, csrf: formTokenFor(auth, request), ...(anyRunning ? { refreshSeconds: 5 } : {}) }),
    );
  });
}
