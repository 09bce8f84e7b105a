import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CrmSyncError } from '../errors/index.js';
import { resumeWorkspace, retryRun } from '../queue/index.js';
import { writeResultsCsv, type RowResult } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { formTokenFor, formTokenGuard } from './auth-hooks.js';
import { html, type SafeHtml } from './html.js';
import { intParam, sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import { searchProblems } from './problem-search.js';
import { runPageBody, type SearchStep } from './run-page.js';
import type { SessionAuth } from './session-auth.js';
import { clientGone, type WorkLimiter } from './work-limiter.js';
import type { WorkspaceScope } from './workspace-scope.js';

export interface RunRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  scope: WorkspaceScope;
  /** Failed rows per page. */
  pageSize: number;
  /** Problem rows one error-text search request looks through, at most. */
  searchScanRows: number;
  limits: { search: WorkLimiter; export: WorkLimiter };
}

type RunRequest<Q = unknown> = FastifyRequest<{ Params: { id: string }; Querystring: Q }>;

const REFRESH_SECONDS = 3;

/** Row numbers from a form (`row=3&row=7`, or `3,7` from a script). */
export function parseRows(value: unknown): number[] {
  const parts = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : [];
  const rows = new Set<number>();
  for (const p of parts) {
    const n = Number(typeof p === 'string' ? p.trim() : p);
    if (!Number.isInteger(n) || n < 1) throw new CrmSyncError('USAGE', `"${String(p).slice(0, 40)}" is not a row number`);
    rows.add(n);
  }
  return [...rows].sort((a, b) => a - b);
}

function noticeFor(q: Record<string, string | undefined>): SafeHtml | undefined {
  const n = intParam(q.n, 0, 0);
  const rows = `${n.toLocaleString('en-US')} row${n === 1 ? '' : 's'}`;
  switch (q.done) {
    case 'retry':
      return html`<div class="notice ok">${rows} sent again. The page refreshes while they run.</div>`;
    case 'resume':
      return html`<div class="notice ok">Workspace resumed; ${n} blocked run${n === 1 ? '' : 's'} continue.</div>`;
    default:
      return undefined;
  }
}

export function registerRunRoutes(app: FastifyInstance, options: RunRoutesOptions): void {
  const { runtime, auth, scope, pageSize, limits } = options;
  const { store } = runtime;

  app.get('/runs/:id', async (request: RunRequest<Record<string, string | undefined>>, reply) => {
    const run = await scope.run(store, request.params.id);
    const q = (request.query.q ?? '').trim().slice(0, 200);
    const wanted = intParam(request.query.page, 1);
    let problems: { rows: RowResult[]; total: number };
    let search: SearchStep | undefined;
    if (q === '') {
      problems = await store.problems(run.id, { offset: (wanted - 1) * pageSize, limit: pageSize });
    } else {
      // A text search is bounded per request (scan limit, a few at once) and resumes from `from`.
      const { signal } = request;
      const step = await limits.search.run(signal, () =>
        searchProblems(store, run.id, { needle: q.toLowerCase(), from: intParam(request.query.from, 0, 0), limit: pageSize, scanLimit: options.searchScanRows, signal }),
      );
      problems = { rows: step.rows, total: step.rows.length };
      search = { scanned: step.scanned, problems: step.problems, next: step.next };
      if (wantsJson(request)) return { run, problems: { rows: step.rows, scanned: step.scanned, of: step.problems, next: step.next } };
    }
    if (wantsJson(request)) return { run, problems };
    const notice = noticeFor(request.query);
    const csrf = formTokenFor(auth, request);
    const body = runPageBody({ run, problems, page: wanted, pageSize, q, csrf, ...(search ? { search } : {}), ...(notice ? { notice } : {}) });
    return sendPage(
      reply,
      page({ title: `Run ${run.id}`, body, nav: 'runs', canSignOut: !auth.insecure, csrf, ...(run.status === 'running' ? { refreshSeconds: REFRESH_SECONDS } : {}) }),
    );
  });

  app.get('/runs/:id/results.csv', async (request: RunRequest<{ failed?: string }>, reply) => {
    const run = await scope.run(store, request.params.id);
    const problemsOnly = request.query.failed === '1' || request.query.failed === 'true';
    const release = await limits.export.acquire(request.signal);
    const out = new PassThrough();
    out.once('close', release);
    // The client went away: stop reading Redis (writeResultsCsv fails on the destroyed stream).
    request.signal.addEventListener('abort', () => out.destroy(clientGone()), { once: true });
    // Streamed: a 100,000-row run is never held in memory; an error mid-way cuts the download.
    writeResultsCsv(store, run.id, out, { problemsOnly }).then(
      () => out.end(),
      (err: unknown) => out.destroy(err instanceof Error ? err : new Error(String(err))),
    );
    return reply
      .type('text/csv; charset=utf-8')
      .header('Content-Disposition', `attachment; filename="${run.id}-${problemsOnly ? 'failed' : 'results'}.csv"`)
      .send(out);
  });

  app.post<{ Params: { id: string }; Body: { row?: unknown; rows?: unknown } | undefined }>('/runs/:id/retry', { preHandler: formTokenGuard(auth) }, async (request, reply) => {
    const run = await scope.run(store, request.params.id);
    const body = request.body ?? {};
    const selected = body.row ?? body.rows;
    const rows = selected !== undefined ? parseRows(selected) : undefined;
    if (rows !== undefined && rows.length === 0) throw new CrmSyncError('USAGE', 'no rows selected: tick the rows to retry first');
    const summary = await retryRun({ runId: run.id, queue: runtime.queue(run.workspace), store, logger: runtime.logger, ...(rows ? { rows } : {}) });
    if (wantsJson(request)) return { run: summary.run, progress: summary.progress };
    return reply.redirect(`/runs/${encodeURIComponent(run.id)}?done=retry&n=${summary.progress.read}`, 303);
  });

  app.post<{ Params: { id: string } }>('/runs/:id/resume', { preHandler: formTokenGuard(auth) }, async (request, reply) => {
    const run = await scope.run(store, request.params.id);
    // Resuming un-pauses the whole workspace queue: only a run the CRM's 401 blocked may do
    // that from here, never a workspace an operator paused on purpose.
    if (run.status !== 'blocked') {
      throw new CrmSyncError(
        'RUN_STATE',
        `run ${run.id} is ${run.status}, not blocked: there is nothing to resume. To un-pause workspace ${run.workspace}, use the Workspaces page.`,
      );
    }
    const resumed = await resumeWorkspace({ queue: runtime.queue(run.workspace), store, workspace: run.workspace });
    if (wantsJson(request)) return { resumed };
    return reply.redirect(`/runs/${encodeURIComponent(run.id)}?done=resume&n=${resumed.length}`, 303);
  });
}
