import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CrmSyncError } from '../errors/index.js';
import { cancelRun, retryRows, writtenLaterWords } from '../lifecycle/index.js';
import { heldPlanWords, PlanStore } from '../plans/index.js';
import { resumeWorkspace } from '../queue/index.js';
import {
  groupProblems,
  problemRowsWhere,
  writeResultsCsv,
  type ProblemStatus,
  type RowResult,
  type RunStore,
} from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { formTokenFor, formTokenGuard } from './auth-hooks.js';
import { html, type SafeHtml } from './html.js';
import { intParam, sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import { isFiltered, problemFilter, searchProblems, type ProblemFilter } from './problem-search.js';
import { runChart, runWorkspaceChart } from './activity-chart.js';
import { GroupCache } from './group-cache.js';
import { problemCount } from './status-words.js';
import { queuePresenceNotice } from './queue-presence.js';
import { RESEND_HINT, runPageBody, type SearchStep } from './run-page.js';
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
  /** Problem rows the "Errors by cause" table groups per page load, at most. */
  groupScanRows: number;
}

const RESULTS = new Set<string>(['failed', 'invalid', 'uncertain', 'cancelled']);
const GROUP_KEY = /^[0-9a-f]{12}$/;

/** The problem filters of a query string; anything malformed is dropped (a link from an old page). */
export function problemFilterOf(query: Record<string, string | undefined>): ProblemFilter {
  const q = (query.q ?? '').trim().slice(0, 200);
  const result = query.result !== undefined && RESULTS.has(query.result) ? (query.result as ProblemStatus) : undefined;
  const group = query.group !== undefined && GROUP_KEY.test(query.group) ? query.group : undefined;
  return { ...(q !== '' ? { q } : {}), ...(result ? { result } : {}), ...(group ? { group } : {}) };
}

type RunRequest<Q = unknown> = FastifyRequest<{ Params: { id: string }; Querystring: Q }>;

const REFRESH_SECONDS = 3;

/** Row numbers from a form (`row=3&row=7`, or `3,7` from a script). */
export function parseRows(value: unknown): number[] {
  const parts = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : [];
  const rows = new Set<number>();
  for (const p of parts) {
    const n = Number(typeof p === 'string' ? p.trim() : p);
    if (!Number.isInteger(n) || n < 1)
      throw new CrmSyncError('USAGE', `"${String(p).slice(0, 40)}" is not a row number`);
    rows.add(n);
  }
  return [...rows].sort((a, b) => a - b);
}

function noticeFor(q: Record<string, string | undefined>): SafeHtml | undefined {
  const n = intParam(q.n, 0, 0);
  const rows = `${n.toLocaleString('en-US')} row${n === 1 ? '' : 's'}`;
  switch (q.done) {
    case 'retry': {
      const later = { skipped: intParam(q.later, 0, 0), resent: intParam(q.resent, 0, 0) };
      const words = writtenLaterWords(later, RESEND_HINT).join(' ');
      return html`<div class="notice ${later.skipped > 0 ? 'warn' : 'ok'}">${rows} sent again. ${words} The page refreshes while they run.</div>`;
    }
    case 'cancel':
      return html`<div class="notice ok">Run cancelled${q.n !== undefined ? `; ${rows} will not be sent` : ''}.</div>`;
    case 'resume':
      return html`<div class="notice ok">Workspace resumed; ${n} blocked run${n === 1 ? '' : 's'} continue.</div>`;
    default:
      return undefined;
  }
}

interface RetryBody {
  row?: unknown;
  rows?: unknown;
  /** An error group's key: retry its rows (failed and uncertain ones). */
  group?: unknown;
  /** `failed`: every failed and uncertain row (the "Retry all" button). */
  scope?: unknown;
  /** The form's checkbox: rows a later run wrote are sent as new writes (RetryRunOptions). */
  resendSuperseded?: unknown;
}

/**
 * Which rows a retry form means. Ticked rows are taken as ticked; a group or "all" means its
 * failed, uncertain and cancelled rows only: invalid rows would fail validation again unchanged, they go
 * through a corrected upload. Undefined = every problem row (an API client's plain retry).
 */
async function rowsToRetry(
  store: RunStore,
  runId: string,
  body: RetryBody,
  limiter: WorkLimiter,
  signal: AbortSignal,
): Promise<number[] | undefined> {
  const selected = body.row ?? body.rows;
  if (selected !== undefined) {
    const rows = parseRows(selected);
    if (rows.length === 0) throw new CrmSyncError('USAGE', 'no rows selected: tick the rows to retry first');
    return rows;
  }
  const group = typeof body.group === 'string' ? body.group : undefined;
  if (group === undefined && body.scope !== 'failed') return undefined;
  if (group !== undefined && !GROUP_KEY.test(group))
    throw new CrmSyncError('USAGE', 'that error group does not exist; reload the run page');
  const inGroup = group !== undefined ? problemFilter({ group }) : () => true;
  const rows = await limiter.run(signal, () =>
    problemRowsWhere(store, runId, (r) => r.status !== 'invalid' && inGroup(r)),
  );
  if (rows.length === 0)
    throw new CrmSyncError(
      'USAGE',
      'no failed rows to retry: invalid rows need a correction first (download, fix, upload)',
    );
  return rows;
}

export function registerRunRoutes(app: FastifyInstance, options: RunRoutesOptions): void {
  const { runtime, auth, scope, pageSize, limits } = options;
  const { store } = runtime;
  const groupCache = new GroupCache();

  app.get('/runs/:id', async (request: RunRequest<Record<string, string | undefined>>, reply) => {
    const run = await scope.run(store, request.params.id);
    const filter = problemFilterOf(request.query);
    const wanted = intParam(request.query.page, 1);
    const { signal } = request;
    let problems: { rows: RowResult[]; total: number };
    let search: SearchStep | undefined;
    if (!isFiltered(filter)) {
      problems = await store.problems(run.id, { offset: (wanted - 1) * pageSize, limit: pageSize });
    } else {
      // A filter is bounded per request (scan limit, a few at once) and resumes from `from`.
      const step = await limits.search.run(signal, () =>
        searchProblems(store, run.id, {
          match: problemFilter(filter),
          from: intParam(request.query.from, 0, 0),
          limit: pageSize,
          scanLimit: options.searchScanRows,
          signal,
        }),
      );
      problems = { rows: step.rows, total: step.rows.length };
      search = { scanned: step.scanned, problems: step.problems, next: step.next };
      if (wantsJson(request))
        return { run, problems: { rows: step.rows, scanned: step.scanned, of: step.problems, next: step.next } };
    }
    const hasProblems = problemCount(run) > 0;
    const groups = hasProblems
      ? await groupCache.get(run, () =>
          limits.search.run(signal, () => groupProblems(store, run.id, { scanLimit: options.groupScanRows, signal })),
        )
      : undefined;
    if (wantsJson(request)) return { run, problems, ...(groups ? { groups } : {}) };
    const notice = noticeFor(request.query);
    const csrf = formTokenFor(auth, request);
    // The run's own series, then its workspace's during the run (other runs included).
    const [ownChart, workspaceChart, { notice: presence, held }] = await Promise.all([
      runChart(runtime, run),
      runWorkspaceChart(runtime, run),
      queuePresenceNotice(runtime, run),
    ]);
    const chart = html`${[ownChart, workspaceChart]}`;
    const heldPlanId = run.options.held?.planId;
    const heldPlan =
      heldPlanId !== undefined
        ? heldPlanWords(
            heldPlanId,
            await new PlanStore({ redis: runtime.redis, prefix: runtime.config.prefix }).get(heldPlanId),
          )
        : undefined;
    const body = runPageBody({
      run,
      problems,
      page: wanted,
      pageSize,
      filter,
      csrf,
      chart,
      presence,
      held,
      ...(heldPlan ? { heldPlan } : {}),
      ...(groups ? { groups } : {}),
      ...(search ? { search } : {}),
      ...(notice ? { notice } : {}),
    });
    return sendPage(
      reply,
      page({
        title: `Run ${run.id}`,
        body,
        nav: 'runs',
        canSignOut: !auth.insecure,
        csrf,
        ...(run.status === 'running' ? { refreshSeconds: REFRESH_SECONDS } : {}),
        charts: true,
      }),
    );
  });

  app.get('/runs/:id/results.csv', async (request: RunRequest<Record<string, string | undefined>>, reply) => {
    const run = await scope.run(store, request.params.id);
    const filter = problemFilterOf(request.query);
    const problemsOnly = request.query.failed === '1' || request.query.failed === 'true' || isFiltered(filter);
    const release = await limits.export.acquire(request.signal);
    const out = new PassThrough();
    out.once('close', release);
    // The client went away: stop reading Redis (writeResultsCsv fails on the destroyed stream).
    request.signal.addEventListener('abort', () => out.destroy(clientGone()), { once: true });
    // Streamed: a 100,000-row run is never held in memory; an error mid-way cuts the download.
    writeResultsCsv(store, run.id, out, {
      problemsOnly,
      ...(isFiltered(filter) ? { filter: problemFilter(filter) } : {}),
    }).then(
      () => out.end(),
      (err: unknown) => out.destroy(err instanceof Error ? err : new Error(String(err))),
    );
    return reply
      .type('text/csv; charset=utf-8')
      .header(
        'Content-Disposition',
        `attachment; filename="${run.id}-${filter.group !== undefined ? `group-${filter.group}` : problemsOnly ? 'failed' : 'results'}.csv"`,
      )
      .send(out);
  });

  app.post<{ Params: { id: string }; Body: RetryBody | undefined }>(
    '/runs/:id/retry',
    { preHandler: formTokenGuard(auth) },
    async (request, reply) => {
      const run = await scope.run(store, request.params.id);
      const rows = await rowsToRetry(store, run.id, request.body ?? {}, limits.search, request.signal);
      const summary = await retryRows({
        runId: run.id,
        config: runtime.config,
        queueFor: (workspace) => runtime.queue(workspace),
        store,
        logger: runtime.logger,
        ...(rows ? { rows } : {}),
        resendSuperseded: request.body?.resendSuperseded === '1' || request.body?.resendSuperseded === 'on',
      });
      const { writtenLater } = summary;
      if (wantsJson(request)) return { run: summary.run, progress: summary.progress, writtenLater };
      // Said only when the retry met rows a later run wrote (the notice's extra sentence).
      const later =
        writtenLater.skipped + writtenLater.resent > 0
          ? `&later=${writtenLater.skipped}&resent=${writtenLater.resent}`
          : '';
      return reply.redirect(`/runs/${encodeURIComponent(run.id)}?done=retry&n=${summary.progress.read}${later}`, 303);
    },
  );

  app.post<{ Params: { id: string } }>(
    '/runs/:id/cancel',
    { preHandler: formTokenGuard(auth) },
    async (request, reply) => {
      const run = await scope.run(store, request.params.id);
      // What `runs cancel` does: waiting rows recorded cancelled, rows in flight finish.
      const { removed, inDoubt } = await cancelRun({
        store,
        queueFor: (workspace) => runtime.queue(workspace),
        runId: run.id,
        reason: 'cancelled from the dashboard',
      });
      // Creates in doubt are never "not sent": they finish their look-up (recorded with their deal, or uncertain).
      if (wantsJson(request)) return { cancelled: run.id, cancelledRows: removed, createsInDoubt: inDoubt };
      const n = `&n=${removed}`;
      return reply.redirect(`/runs/${encodeURIComponent(run.id)}?done=cancel${n}`, 303);
    },
  );

  app.post<{ Params: { id: string } }>(
    '/runs/:id/resume',
    { preHandler: formTokenGuard(auth) },
    async (request, reply) => {
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
    },
  );
}
