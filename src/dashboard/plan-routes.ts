import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { getWorkspace } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import {
  applyPlan,
  planRowFilter,
  PlanStore,
  undoWords,
  writePlanCsv,
  type PlanMove,
  type PlanRecord,
  type PlanRowFilter,
} from '../plans/index.js';
import type { Runtime } from '../runtime/index.js';
import { authOf, formTokenFor, formTokenGuard } from './auth-hooks.js';
import { html } from './html.js';
import { intParam, sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import { PLAN_ACTIONS, planLabel, planPageBody, plansPageBody } from './plan-pages.js';
import type { ImportStore } from './import-store.js';
import type { SessionAuth } from './session-auth.js';
import { clientGone, type WorkLimiter } from './work-limiter.js';
import type { WorkspaceScope } from './workspace-scope.js';

export interface PlanRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  scope: WorkspaceScope;
  /** Plan rows per page. */
  pageSize: number;
  /** Plans per page on the plans list. */
  listPageSize: number;
  /** Downloads at once (shared with the runs' CSV downloads). */
  exports: WorkLimiter;
  /** Filtered or later pages of a plan's rows at once (shared with the runs' searches). */
  searches: WorkLimiter;
  /** The browser imports: a plan made for one links back to it, and its Apply opens the run. */
  imports?: ImportStore;
}

/** What `crm-sync plan` makes: `plan-` and a run id. */
const PLAN_ID = /^plan-\d{8}-\d{6}-\d{3}-[0-9a-z]{8}$/;

type PlanRequest<Q = unknown> = FastifyRequest<{ Params: { id: string }; Querystring: Q }>;

/** The filters of a query string; anything malformed is dropped. */
function filterOf(q: Record<string, string | undefined>): PlanRowFilter {
  const action = (PLAN_ACTIONS as readonly string[]).includes(q.action ?? '') ? q.action : undefined;
  const field = /^[a-z_]{1,40}$/.test(q.field ?? '') ? q.field : undefined;
  const text = (q.q ?? '').trim().slice(0, 200);
  return { ...(action ? { action } : {}), ...(field ? { field } : {}), ...(text !== '' ? { text } : {}) };
}

/**
 * The plan pages (issue 33): the plans list (newest first, paged, with Discard), a plan's counts, approval and prediction, its rows with each field's
 * before → after (filtered by action, field and text; paged, so a 100,000-row plan is read a
 * bucket at a time), the CSV download, and the Approve and Discard buttons (form posts with the
 * session's form token). Scoped like every route: another workspace's plan is "not found".
 */
export function registerPlanRoutes(app: FastifyInstance, o: PlanRoutesOptions): void {
  const plans = new PlanStore({ redis: o.runtime.redis, prefix: o.runtime.config.prefix });

  const planOf = async (id: string): Promise<PlanRecord> => {
    const missing = () => new CrmSyncError('PLAN_NOT_FOUND', `no plan ${id.slice(0, 80)}`);
    if (!PLAN_ID.test(id)) throw missing();
    const plan = await plans.get(id);
    if (plan === null || !o.scope.allows(plan.workspace)) throw missing();
    return plan;
  };

  app.get('/plans', async (request: FastifyRequest<{ Querystring: Record<string, string | undefined> }>, reply) => {
    const wanted = intParam(request.query.page, 1);
    const listed = await plans.listPage({
      workspaces: o.scope.served,
      offset: (wanted - 1) * o.listPageSize,
      limit: o.listPageSize,
    });
    if (wantsJson(request)) return listed;
    const csrf = formTokenFor(o.auth, request);
    const discarded = request.query.done === 'discard' ? planIdOf(request.query.plan) : undefined;
    const notice =
      discarded !== undefined ? html`<div class="notice ok">Plan ${discarded} discarded.</div>` : ('' as const);
    const body = plansPageBody({ ...listed, pageSize: o.listPageSize, page: wanted, csrf, notice });
    return sendPage(reply, page({ title: 'Plans', body, nav: 'plans', canSignOut: !o.auth.insecure, csrf }));
  });

  app.get('/plans/:id', async (request: PlanRequest<Record<string, string | undefined>>, reply) => {
    const plan = await planOf(request.params.id);
    const filter = filterOf(request.query);
    const wanted = intParam(request.query.page, 1);
    const read = () => plans.page(plan, (wanted - 1) * o.pageSize, o.pageSize + 1, planRowFilter(filter));
    // The first page unfiltered is a bucket or two; a filter or a later page reads the plan up to
    // there (a 100,000-row plan: a thousand buckets), so those wait their turn like searches.
    const scans = wanted > 1 || Object.keys(filter).length > 0;
    const rows = scans ? await o.searches.run(request.signal, read) : await read();
    const more = rows.length > o.pageSize;
    const shown = rows.slice(0, o.pageSize);
    if (wantsJson(request)) return { plan, rows: shown, more };
    const csrf = formTokenFor(o.auth, request);
    const done = request.query.done;
    const notice =
      done === 'approve'
        ? html`<div class="notice ok">Plan approved.</div>`
        : done === 'apply' && plan.runId !== undefined
          ? html`<div class="notice ok">Plan applied: run <a href="/runs/${encodeURIComponent(plan.runId)}">${plan.runId}</a> sends its writes.</div>`
          : done === 'discard'
            ? html`<div class="notice ok">Plan discarded: it can no longer be approved or applied.</div>`
            : ('' as const);
    const { requireApproval } = getWorkspace(o.runtime.config, plan.workspace);
    const made = await o.imports?.ofPlan(plan.workspace, plan.id);
    const fromImport =
      made != null
        ? html`<p class="plan-link" data-import="${made.id}">Made for the import of <a href="/imports/${encodeURIComponent(made.workspace)}/${encodeURIComponent(made.id)}">${made.fileName}</a>.</p>`
        : ('' as const);
    const body = planPageBody(plan, shown, {
      filter,
      page: wanted,
      more,
      csrf,
      notice: html`${fromImport}${notice}`,
      requireApproval,
    });
    return sendPage(
      reply,
      page({ title: `Plan ${planLabel(plan)}`, body, nav: 'plans', canSignOut: !o.auth.insecure, csrf }),
    );
  });

  app.get('/plans/:id/plan.csv', async (request: PlanRequest<Record<string, string | undefined>>, reply) => {
    const plan = await planOf(request.params.id);
    const filter = filterOf(request.query);
    const release = await o.exports.acquire(request.signal);
    const out = new PassThrough();
    out.once('close', release);
    request.signal.addEventListener('abort', () => out.destroy(clientGone()), { once: true });
    writePlanCsv(plans, plan, out, planRowFilter(filter)).then(
      () => out.end(),
      (err: unknown) => out.destroy(err instanceof Error ? err : new Error(String(err))),
    );
    return reply
      .type('text/csv; charset=utf-8')
      .header('Content-Disposition', `attachment; filename="${plan.id}.csv"`)
      .send(out);
  });

  app.post<{ Params: { id: string } }>(
    '/plans/:id/approve',
    { preHandler: formTokenGuard(o.auth) },
    async (request, reply) => {
      const plan = await planOf(request.params.id);
      const move = await plans.approve(plan.id, actorOf(request));
      if (!move.ok) throw notMoved(plan, move, 'approved');
      if (wantsJson(request)) return { plan: await plans.require(plan.id) };
      return reply.redirect(`/plans/${encodeURIComponent(plan.id)}?done=approve`, 303);
    },
  );

  // Apply as `crm-sync apply` does (applyPlan: refused, nothing queued, when the workspace requires
  // approval and the plan has none, or it expired, was discarded or applied). The answer comes
  // once the run exists; its rows are queued meanwhile, by this process, as the CLI queues them.
  app.post<{ Params: { id: string } }>(
    '/plans/:id/apply',
    { preHandler: formTokenGuard(o.auth) },
    async (request, reply) => {
      const plan = await planOf(request.params.id);
      const ws = getWorkspace(o.runtime.config, plan.workspace);
      const { runtime } = o;
      const started = new Promise<string>((resolve, reject) => {
        applyPlan({
          plans,
          store: runtime.store,
          queue: runtime.queue(plan.workspace),
          planId: plan.id,
          requireApproval: ws.requireApproval,
          rowsPerJob: ws.rowsPerJob,
          resultsDir: o.runtime.config.resultsDir,
          by: actorOf(request),
          logger: runtime.logger,
          onRun: (run) => resolve(run.id),
        }).then(
          ({ run }) => resolve(run.id),
          (err: unknown) => {
            runtime.logger.warn({ planId: plan.id, err }, 'dashboard apply failed');
            reject(err instanceof Error ? err : new Error(String(err)));
          },
        );
      });
      const runId = await started;
      if (wantsJson(request)) return { plan: await plans.require(plan.id), runId };
      // An import's plan goes on to its run: the flow's next page is the run's progress.
      if ((await o.imports?.ofPlan(plan.workspace, plan.id)) != null)
        return reply.redirect(`/runs/${encodeURIComponent(runId)}`, 303);
      return reply.redirect(`/plans/${encodeURIComponent(plan.id)}?done=apply`, 303);
    },
  );

  app.post<{ Params: { id: string }; Body: Record<string, unknown> }>(
    '/plans/:id/discard',
    { preHandler: formTokenGuard(o.auth) },
    async (request, reply) => {
      const plan = await planOf(request.params.id);
      const move = await plans.discard(plan.id, actorOf(request));
      if (!move.ok) throw notMoved(plan, move, 'discarded');
      if (wantsJson(request)) return { plan: await plans.require(plan.id) };
      // Back where the button was: the list, or the plan's page.
      const id = encodeURIComponent(plan.id);
      const back = request.body?.from === 'list' ? `/plans?done=discard&plan=${id}` : `/plans/${id}?done=discard`;
      return reply.redirect(back, 303);
    },
  );
}

/** A plan id from a query value (the list's notice), or undefined. */
function planIdOf(value: string | undefined): string | undefined {
  return value !== undefined && PLAN_ID.test(value) ? value : undefined;
}

/** Why a plan cannot be approved or discarded, in words (409). */
function notMoved(plan: PlanRecord, move: Extract<PlanMove, { ok: false }>, verb: 'approved' | 'discarded') {
  const id = plan.id;
  const run = plan.runId !== undefined ? ` by run ${plan.runId}` : '';
  const why: Partial<Record<string, string>> = {
    expired: `plan ${id} expired at ${plan.expiresAt}`,
    discarded: `plan ${id} was discarded`,
    applied: `plan ${id} was already applied${run}`,
    applying: `plan ${id} is being applied${run}`,
    ...undoWords(plan, move.other),
  };
  const reason = why[move.why];
  return new CrmSyncError(
    'PLAN_REFUSED',
    reason !== undefined ? `${reason}: it can no longer be ${verb}` : `plan ${id} cannot be ${verb} (${move.why})`,
  );
}

/**
 * Who approved or discarded from the dashboard: `dashboard:<session>`, the session named by a
 * fingerprint of its id (the id itself is a secret), or `dashboard:token` for a script with the
 * bearer token.
 */
export function actorOf(request: FastifyRequest): string {
  const who = authOf(request);
  if (who.kind === 'bearer' || who.sid === '') return 'dashboard:token';
  return `dashboard:session-${createHash('sha256').update(who.sid).digest('hex').slice(0, 12)}`;
}
