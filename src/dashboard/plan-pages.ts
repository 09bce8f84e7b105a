import { basename } from 'node:path';
import {
  afterCell,
  planChanges,
  planState,
  type PlanState,
  type PlanAction,
  type PlanRecord,
  type PlanRow,
  type PlanRowFilter,
} from '../plans/index.js';
import { html, query, type SafeHtml } from './html.js';
import { firstTable, formatTime, operationWords, type StatusTone } from './status-words.js';

/** Every action a plan row can have, in the order the pages show them. */
export const PLAN_ACTIONS: readonly PlanAction[] = ['update', 'create', 'skip', 'not-found', 'ambiguous', 'invalid'];

const STATE_WORDS: Record<PlanState, { text: string; tone: StatusTone | ''; tip: string }> = {
  pending: { text: 'Pending', tone: 'blocked', tip: 'nobody approved it yet; approve it to apply it' },
  approved: { text: 'Approved', tone: 'running', tip: 'approved: apply it with crm-sync apply' },
  applying: { text: 'Applying', tone: 'running', tip: 'its run is queueing its writes' },
  applied: { text: 'Applied', tone: 'ok', tip: 'every write of it is queued in its run; a plan is applied once' },
  discarded: { text: 'Discarded', tone: '', tip: 'discarded: it can no longer be approved or applied' },
  expired: { text: 'Expired', tone: 'warn', tip: 'past its expiry (planTtlMs): make a new plan' },
};

/** A plan can still be approved (pending) or discarded (pending or approved), while not expired. */
export function canApprove(plan: PlanRecord): boolean {
  return !plan.expired && plan.status === 'pending';
}

/** A plan can be applied once, while pending or approved and not expired (a workspace that requires approval refuses a pending one). */
export function canApply(plan: PlanRecord): boolean {
  return !plan.expired && (plan.status === 'pending' || plan.status === 'approved');
}

export function canDiscard(plan: PlanRecord): boolean {
  return !plan.expired && (plan.status === 'pending' || plan.status === 'approved');
}

export function planBadge(plan: PlanRecord): SafeHtml {
  const state = planState(plan);
  const w = STATE_WORDS[state];
  return html`<span class="badge ${w.tone}" data-status="${state}" title="${w.tip}">${w.text}</span>`;
}

/** A plan's short name: its file's base name, a query's first table, or the source label as given. */
export function planLabel(plan: Pick<PlanRecord, 'source'>): string {
  const pg = /^postgres \([^)]*\): (.*)$/s.exec(plan.source);
  if (pg !== null) {
    const table = firstTable(pg[1] ?? '');
    return table !== undefined ? `PostgreSQL: ${table}` : 'PostgreSQL query';
  }
  return /[\\/]/.test(plan.source) ? basename(plan.source) : plan.source;
}

/** `20 update, 5 skip`: the actions the plan has. */
function countsWords(plan: PlanRecord): SafeHtml {
  const kinds = PLAN_ACTIONS.filter((a) => plan.counts[a] > 0);
  if (kinds.length === 0) return html`<span class="muted">no rows</span>`;
  return html`${kinds.map(
    (a) => html`<div class="kind" data-kind="${a}"><b>${plan.counts[a].toLocaleString('en-US')}</b> ${a}</div>`,
  )}`;
}

/** The run an applied (or applying) plan made, linked to its run page. */
function runLink(plan: PlanRecord): SafeHtml | '' {
  if (plan.runId === undefined) return '';
  return html`<a class="mono" href="/runs/${encodeURIComponent(plan.runId)}">${plan.runId}</a>`;
}

/** The hidden form-token field and a Discard button (pending or approved plans). */
export function discardForm(plan: PlanRecord, csrf: string, from: 'list' | 'plan'): SafeHtml | '' {
  if (!canDiscard(plan)) return '';
  return html`<form method="post" action="/plans/${encodeURIComponent(plan.id)}/discard"><input type="hidden" name="_csrf" value="${csrf}"><input type="hidden" name="from" value="${from}"><button class="danger" type="submit" aria-label="Discard plan ${plan.id}">Discard</button></form>`;
}

export interface PlansPageData {
  plans: PlanRecord[];
  total: number;
  pageSize: number;
  /** 1-based. */
  page: number;
  csrf: string;
  notice: SafeHtml | '';
}

function planLine(plan: PlanRecord, csrf: string): SafeHtml {
  return html`<tr data-plan="${plan.id}">
  <td class="run"><a href="/plans/${encodeURIComponent(plan.id)}" title="${plan.source}"><b>${planLabel(plan)}</b></a><div class="muted mono small">${plan.id}</div></td>
  <td class="wide">${plan.workspace}<div class="small muted">${operationWords(plan.operation)}</div></td>
  <td class="status">${planBadge(plan)}</td>
  <td class="num">${plan.rows.toLocaleString('en-US')}</td>
  <td class="results">${countsWords(plan)}</td>
  <td class="wide started">${formatTime(plan.createdAt)}<div class="small muted">expires ${formatTime(plan.expiresAt)}</div></td>
  <td class="wide approver">${plan.approval ? html`${plan.approval.by}<div class="small muted">${formatTime(plan.approval.at)}</div>` : html`<span class="muted">—</span>`}</td>
  <td>${runLink(plan) || html`<span class="muted">—</span>`}</td>
  <td>${discardForm(plan, csrf, 'list')}</td>
</tr>`;
}

/** The plans list: the served workspaces' plans, newest first, paged. */
export function plansPageBody(data: PlansPageData): SafeHtml {
  const { total, pageSize, page } = data;
  const pages = Math.max(1, Math.ceil(total / pageSize));
  const first = total === 0 ? 0 : (page - 1) * pageSize + 1;
  const last = Math.min(total, page * pageSize);
  return html`<h1>Plans</h1>
<p class="sub">Every stored plan (<code>crm-sync plan</code>, and nightly syncs held by their guard), newest first. Open a plan to review each field it would change before → after, approve it, or download it as CSV; apply an approved plan with <code>crm-sync apply &lt;planId&gt;</code>. Plans expire after the workspace's <code>planTtlMs</code>.</p>
${data.notice}
<div class="scroll"><table>
<thead><tr><th>Plan</th><th class="wide">Workspace</th><th>Status</th>
<th class="num">Rows</th><th>Planned</th><th class="wide">Created</th><th class="wide">Approved by</th><th>Run</th><th>Discard</th></tr></thead>
<tbody>${data.plans.length === 0 ? html`<tr><td colspan="9" class="muted">No plans. Make one with <code>crm-sync plan &lt;file&gt; --op &lt;op&gt; -w &lt;workspace&gt;</code>.</td></tr>` : data.plans.map((p) => planLine(p, data.csrf))}</tbody>
</table></div>
<div class="pager">
  ${page > 1 ? html`<a href="/plans${query({ page: page - 1 })}">← Newer</a>` : ''}
  <span>${total === 0 ? 'No plans' : `Plans ${first.toLocaleString('en-US')}–${last.toLocaleString('en-US')} of ${total.toLocaleString('en-US')}`}</span>
  ${page < pages ? html`<a href="/plans${query({ page: page + 1 })}">Older →</a>` : ''}
</div>`;
}

export interface PlanPageView {
  filter: PlanRowFilter;
  page: number;
  more: boolean;
  csrf: string;
  notice: SafeHtml | '';
  /** The plan's workspace refuses to apply a plan nobody approved. */
  requireApproval: boolean;
}

/** Who approved or discarded it, and when; the run it became. */
function planHistory(plan: PlanRecord): SafeHtml {
  const parts: SafeHtml[] = [html`created ${formatTime(plan.createdAt)}`];
  if (plan.approval) parts.push(html`approved ${formatTime(plan.approval.at)} by <b>${plan.approval.by}</b>`);
  if (plan.discard) parts.push(html`discarded ${formatTime(plan.discard.at)} by <b>${plan.discard.by}</b>`);
  if (plan.apply) parts.push(html`applied ${formatTime(plan.apply.at)} by <b>${plan.apply.by}</b>`);
  parts.push(html`${plan.expired ? 'expired' : 'expires'} ${formatTime(plan.expiresAt)}`);
  if (plan.runId !== undefined)
    parts.push(
      html`<span data-plan-run>${plan.status === 'applied' ? 'applied by run' : 'being applied by run'} ${runLink(plan)}</span>`,
    );
  return html`${parts.map((p, i) => (i === 0 ? p : html` · ${p}`))}`;
}

/**
 * A plan's page: its counts, approval and prediction, its rows with each field's before → after
 * (filtered by action, field and text; paged), the CSV download, Approve, Apply and Discard.
 */
/** A plan a nightly sync's tick made: which sync, and why it waits (a held tick) or what decided it. */
function syncNotice(plan: PlanRecord): SafeHtml | '' {
  if (plan.syncName === undefined) return '';
  const waiting = (plan.status === 'pending' || plan.status === 'approved') && !plan.expired;
  return html`<div class="notice ${waiting ? 'warn' : ''}" data-sync="${plan.syncName}"><p><b>Made by a tick of nightly sync “${plan.syncName}”${waiting ? ', held for approval' : ''}.</b></p>${plan.reason !== undefined ? html`<p>${plan.reason}</p>` : ''}</div>`;
}

export function planPageBody(plan: PlanRecord, rows: PlanRow[], v: PlanPageView): SafeHtml {
  const id = encodeURIComponent(plan.id);
  const keep = { action: v.filter.action, field: v.filter.field, q: v.filter.text };
  const p = plan.prediction;
  const tiles = PLAN_ACTIONS.map(
    (a) => html`<div data-kind="${a}"><b>${plan.counts[a].toLocaleString('en-US')}</b><span>${a}</span></div>`,
  );
  return html`<h1 class="plan-title">Plan · ${planLabel(plan)}</h1>
<p class="sub">Plan <span class="mono">${plan.id}</span> · ${operationWords(plan.operation)} · workspace <b>${plan.workspace}</b> · source <span class="mono">${plan.source}</span></p>
${v.notice}
${syncNotice(plan)}
<div class="actions">${planBadge(plan)}
${
  canApprove(plan)
    ? html`<form method="post" action="/plans/${id}/approve"><input type="hidden" name="_csrf" value="${v.csrf}"><button class="primary" type="submit">Approve plan</button></form>`
    : ''
}
${
  canApply(plan) && !(v.requireApproval && plan.status === 'pending')
    ? html`<form method="post" action="/plans/${id}/apply"><input type="hidden" name="_csrf" value="${v.csrf}"><button class="${canApprove(plan) ? '' : 'primary'}" type="submit" aria-label="Apply plan ${plan.id}${plan.status === 'pending' ? ' without approval' : ''}">${plan.status === 'pending' ? 'Apply without approval' : 'Apply plan'}</button></form>${
        plan.status === 'pending'
          ? html`<span class="small muted" data-approval="optional">not approved — this workspace does not require approval</span>`
          : ''
      }`
    : canApply(plan)
      ? html`<span class="small muted" data-approval="required">approve it first: this workspace requires approval</span>`
      : ''
}
${discardForm(plan, v.csrf, 'plan')}
<a href="/plans/${id}/plan.csv${query(keep)}">Download CSV</a>
</div>
<p class="small muted history">${planHistory(plan)}</p>
<div class="counts"><div data-kind="total"><b>${plan.rows.toLocaleString('en-US')}</b><span>Rows</span></div>${tiles}</div>
<p>Apply would take ${p.requests} requests (${p.writes} writes, ${p.listPages} list pages for the drift check)${
    p.seconds !== undefined ? `, about ${p.seconds} s at ${p.limit}` : '; how long is not known (unknown limit)'
  }. ${
    plan.status === 'pending' || plan.status === 'approved'
      ? html`Apply it with <code>crm-sync apply ${plan.id} --wait</code>: a record someone changed since the plan is not written, it ends <b>drifted</b>.`
      : ''
  }</p>
<h2 id="rows">Rows: before → after</h2>
<form class="filters" method="get" action="/plans/${id}">
  <label>Action<select name="action"><option value="">Any action</option>${PLAN_ACTIONS.map(
    (a) => html`<option value="${a}"${v.filter.action === a ? html` selected` : ''}>${a}</option>`,
  )}</select></label>
  <label>Field<select name="field"><option value="">Any field</option>${plan.fields.map(
    (f) => html`<option value="${f}"${v.filter.field === f ? html` selected` : ''}>${f}</option>`,
  )}</select></label>
  <label>Text<input type="search" name="q" value="${v.filter.text ?? ''}" placeholder="record, value or message"></label>
  <button type="submit">Filter</button>
  ${v.filter.action || v.filter.field || v.filter.text ? html`<a href="/plans/${id}">Clear filters</a>` : ''}
</form>
<div class="scroll"><table>
<thead><tr><th class="num">Row</th><th>Action</th><th>Record</th><th>Field</th><th>Before</th><th>After</th><th>Message</th></tr></thead>
<tbody>${
    rows.length === 0
      ? html`<tr><td colspan="7" class="muted">No rows match.</td></tr>`
      : rows.flatMap((r) => {
          // Filtered by a field: that field's before → after, not the row's other changes.
          const changes = planChanges(r).filter((c) => v.filter.field === undefined || c.field === v.filter.field);
          const record = r.recordId ?? r.key ?? '';
          return (changes.length > 0 ? changes : [{ field: '', before: '', after: '' }]).map(
            (c: { field: string; before: string; after: string; name?: string }) =>
              html`<tr data-row="${r.row}"><td class="num">${r.row}</td><td>${r.action}</td><td>${record}</td><td>${c.field}</td><td>${c.before}</td><td>${afterCell(c)}</td><td>${r.message ?? ''}</td></tr>`,
          );
        })
  }</tbody>
</table></div>
<div class="pager">
  ${v.page > 1 ? html`<a href="/plans/${id}${query({ ...keep, page: v.page - 1 })}#rows">← Previous</a>` : ''}
  <span>Page ${v.page}</span>
  ${v.more ? html`<a href="/plans/${id}${query({ ...keep, page: v.page + 1 })}#rows">Next →</a>` : ''}
</div>`;
}
