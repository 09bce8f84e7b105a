import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isCrmSyncError } from '../errors/index.js';
import { RUN_STATUSES, searchRuns, type RunRecord, type RunStatus } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { formTokenFor } from './auth-hooks.js';
import { intParam, sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import { runsPageBody, type RunsFilter } from './runs-page.js';
import type { SessionAuth } from './session-auth.js';
import type { WorkLimiter } from './work-limiter.js';
import { isRunId, type WorkspaceScope } from './workspace-scope.js';

export interface RunsRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  scope: WorkspaceScope;
  workspaces: string[];
  /** Runs per page. */
  pageSize: number;
  /** Newest runs one text search looks through. */
  searchScanRuns: number;
  /** Text searches served at once (they page through the run list). */
  limiter: WorkLimiter;
}

const STATUSES = new Set<string>(RUN_STATUSES);

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim() !== '' ? value.trim().slice(0, 200) : undefined;
}

export function registerRunsRoutes(app: FastifyInstance, options: RunsRoutesOptions): void {
  const { runtime, auth, scope, pageSize, limiter } = options;

  app.get('/', async (request: FastifyRequest<{ Querystring: Record<string, string | undefined> }>, reply) => {
    const q = request.query;
    const status = q.status !== undefined && STATUSES.has(q.status) ? (q.status as RunStatus) : undefined;
    const workspace = text(q.workspace);
    const sync = text(q.sync);
    const search = text(q.q);
    const filter: RunsFilter = {
      page: intParam(q.page, 1),
      ...(status ? { status } : {}),
      ...(workspace ? { workspace } : {}),
      ...(sync ? { sync } : {}),
      ...(search ? { q: search } : {}),
    };
    const filters = {
      ...(status ? { status } : {}),
      ...(workspace ? { workspace } : {}),
      ...(sync ? { syncName: sync } : {}),
    };
    const offset = (filter.page - 1) * pageSize;
    let listed: { runs: RunRecord[]; total: number };
    let searched: { scanned: number; complete: boolean } | undefined;
    if (search === undefined) {
      listed = await scope.listRuns(runtime.store, { offset, limit: pageSize, ...filters });
    } else if (isRunId(search)) {
      // A whole run id: one lookup, not a scan (and a run out of scope is simply not found).
      const run = await scope.run(runtime.store, search).catch((err: unknown) => {
        if (isCrmSyncError(err) && err.code === 'RUN_NOT_FOUND') return null;
        throw err;
      });
      listed = { runs: run !== null && offset === 0 ? [run] : [], total: run !== null ? 1 : 0 };
    } else {
      const found = await limiter.run(request.signal, () =>
        searchRuns((query) => scope.listRuns(runtime.store, query), {
          text: search,
          filters,
          offset,
          limit: pageSize,
          scanLimit: options.searchScanRuns,
          signal: request.signal,
        }),
      );
      listed = found;
      searched = { scanned: found.scanned, complete: found.complete };
    }
    const { runs, total } = listed;
    if (wantsJson(request)) return { total, runs, ...(searched ? { searched } : {}) };
    const body = runsPageBody({
      runs,
      total,
      pageSize,
      filter,
      workspaces: options.workspaces,
      ...(searched ? { searched } : {}),
    });
    const anyRunning = runs.some((r) => r.status === 'running');
    return sendPage(
      reply,
      page({
        title: 'Runs',
        body,
        nav: 'runs',
        canSignOut: !auth.insecure,
        csrf: formTokenFor(auth, request),
        ...(anyRunning ? { refreshSeconds: 5 } : {}),
      }),
    );
  });
}
