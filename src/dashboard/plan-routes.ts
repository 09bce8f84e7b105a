import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CrmSyncError } from '../errors/index.js';
import {
  planChanges,
  planRowFilter,
  PlanStore,
  refusal,
  writePlanCsv,
  type PlanRecord,
  type PlanRow,
  type PlanRowFilter,
} from '../plans/index.js';
import type { Runtime } from '../runtime/index.js';
import { authOf, formTokenFor, formTokenGuard } from './auth-hooks.js';
import { html, query, type SafeHtml } from './html.js';
import { intParam, sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import type { SessionAuth } from './session-auth.js';
import { clientGone, type WorkLimiter } from './work-limiter.js';
import type { WorkspaceScope } from './workspace-scope.js';

export interface PlanRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  scope: WorkspaceScope;
  /** Plan rows per page. */
  pageSize: number;
  /** Downloads at once (shared with the runs' CSV downloads). */
  exports: WorkLimiter;
}

const ACTIONS = ['update', 'create', 'skip', 'not-found', 'ambiguous', 'invalid'] as const;
/** What `crm-sync plan` makes: `plan-` and a run id. */
const PLAN_ID = /^plan-\d{8}-\d{6}-\d{3}-[0-9a-z]{8}$/;

type PlanRequest<Q = unknown> = FastifyRequest<{ Params: { id: string }; Querystring: Q }>;

/** The filters of a query string; anything malformed is dropped. */
function filterOf(q: Record<string, string | undefined>): PlanRowFilter {
  const action = (ACTIONS as readonly string[]).includes(q.action ?? '') ? q.action : undefined;
  const field = /^[a-z_]{1,40}$/.test(q.field ?? '') ? q.field : undefined;
  const text = (q.q ?? '').trim().slice(0, 200);
  return { ...(action ? { action } : {}), ...(field ? { field } : {}), ...(text !== '' ? { text } : {}) };
}

/**
 * The plan pages (issue 33): a plan's counts, approval and prediction, its rows with each field's
 * before → after (filtered by action, field and text; paged, so a 100,000-row plan is read a
 * bucket at a time), the CSV download, and the Approve button (a form post with the session's
 * form token). Scoped like every route: another workspace's plan is "not found".
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

  app.get('/plans/:id', async (request: PlanRequest<Record<string, string | undefined>>, reply) => {
    const plan = await planOf(request.params.id);
    const filter = filterOf(request.query);
    const wanted = intParam(request.query.page, 1);
    const rows = await plans.page(plan, (wanted - 1) * o.pageSize, o.pageSize + 1, planRowFilter(filter));
    const more = rows.length > o.pageSize;
    const shown = rows.slice(0, o.pageSize);
    if (wantsJson(request)) return { plan, rows: shown, more };
    const csrf = formTokenFor(o.auth, request);
    const notice = request.query.done === 'approve' ? html`<div class="notice ok">Plan approved.</div>` : ('' as const);
    const body = planPageBody(plan, shown, { filter, page: wanted, more, csrf, notice });
    return sendPage(reply, page({ title: `Plan ${plan.id}`, body, nav: 'runs', canSignOut: !o.auth.insecure, csrf }));
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
      const move = await plans.approve(plan.id, approverOf(request));
      if (!move.ok) {
        const err = refusal(plan, move);
        throw new CrmSyncError('PLAN_REFUSED', err.message.replace('cannot be applied', 'cannot be approved'));
      }
      if (wantsJson(request)) return { plan: await plans.require(plan.id) };
      return reply.redirect(`/plans/${encodeURIComponent(plan.id)}?done=approve`, 303);
    },
  );
}

/**
 * Who approved from the dashboard: `dashboard:<session>`, the session named by a fingerprint of its
 * id (the id itself is a secret), or `dashboard:token` for a script with the bearer token.
 */
function approverOf(request: FastifyRequest): string {
  const who = authOf(request);
  if (who.kind === 'bearer' || who.sid === '') return 'dashboard:token';
  return `dashboard:session-${createHash('sha256').update(who.sid).digest('hex').slice(0, 12)}`;
}

function statusText(plan: PlanRecord): string {
  if (plan.expired) return `Expired (${plan.status})`;
  if (plan.status === 'applied' || plan.status === 'applying') return `${plan.status} by run ${plan.runId ?? '?'}`;
  return plan.status;
}

function planPageBody(
  plan: PlanRecord,
  rows: PlanRow[],
  v: { filter: PlanRowFilter; page: number; more: boolean; csrf: string; notice: SafeHtml | '' },
): SafeHtml {
  const id = encodeURIComponent(plan.id);
  const keep = { action: v.filter.action, field: v.filter.field, q: v.filter.text };
  const p = plan.prediction;
  const approvable = !plan.expired && (plan.status === 'pending' || plan.status === 'approved');
  const tiles = ACTIONS.map(
    (a) => html`<div data-kind="${a}"><b>${plan.counts[a].toLocaleString('en-US')}</b><span>${a}</span></div>`,
  );
  return html`<h1>Plan ${plan.id}</h1>
${v.notice}
<p>${plan.operation} on ${plan.workspace} from ${plan.source} · status <b data-status="${plan.status}">${statusText(plan)}</b>
${plan.approval ? html` · approved ${plan.approval.at} by ${plan.approval.by}` : ''} · expires ${plan.expiresAt}
${plan.runId ? html` · <a href="/runs/${encodeURIComponent(plan.runId)}">run ${plan.runId}</a>` : ''}</p>
<div class="counts"><div data-kind="total"><b>${plan.rows.toLocaleString('en-US')}</b><span>Rows</span></div>${tiles}</div>
<p>Apply would take ${p.requests} requests (${p.writes} writes, ${p.listPages} list pages for the drift check)${
    p.seconds !== undefined ? `, about ${p.seconds} s at ${p.limit}` : '; how long is not known (unknown limit)'
  }.</p>
<div class="actions">
${
  approvable && plan.status === 'pending'
    ? html`<form method="post" action="/plans/${id}/approve"><input type="hidden" name="_csrf" value="${v.csrf}"><button class="primary" type="submit">Approve plan</button></form>`
    : ''
}
<a href="/plans/${id}/plan.csv${query(keep)}">Download CSV</a>
</div>
<p>Apply it with <code>crm-sync apply ${plan.id} --wait</code>.</p>
<form class="filters" method="get" action="/plans/${id}">
  <label>Action<select name="action"><option value="">Any action</option>${ACTIONS.map(
    (a) => html`<option value="${a}"${v.filter.action === a ? html` selected` : ''}>${a}</option>`,
  )}</select></label>
  <label>Field<select name="field"><option value="">Any field</option>${plan.fields.map(
    (f) => html`<option value="${f}"${v.filter.field === f ? html` selected` : ''}>${f}</option>`,
  )}</select></label>
  <label>Text<input type="search" name="q" value="${v.filter.text ?? ''}"></label>
  <button type="submit">Filter</button>
</form>
<div class="scroll"><table>
<thead><tr><th class="num">Row</th><th>Action</th><th>Record</th><th>Field</th><th>Before</th><th>After</th><th>Message</th></tr></thead>
<tbody>${rows.flatMap((r) => {
    const changes = planChanges(r);
    const record = r.recordId ?? r.key ?? '';
    return (changes.length > 0 ? changes : [{ field: '', before: '', after: '' }]).map(
      (c) =>
        html`<tr data-row="${r.row}"><td class="num">${r.row}</td><td>${r.action}</td><td>${record}</td><td>${c.field}</td><td>${c.before}</td><td>${c.after}</td><td>${r.message ?? ''}</td></tr>`,
    );
  })}</tbody>
</table></div>
<div class="pager">
  ${v.page > 1 ? html`<a href="/plans/${id}${query({ ...keep, page: v.page - 1 })}">← Previous</a>` : ''}
  <span>Page ${v.page}</span>
  ${v.more ? html`<a href="/plans/${id}${query({ ...keep, page: v.page + 1 })}">Next →</a>` : ''}
</div>`;
}
