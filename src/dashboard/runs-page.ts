import { durationParts, type RunRecord, type RunStatus } from '../runs/index.js';
import { html, query, type SafeHtml } from './html.js';
import { formatTime, operationWords, progress, resultCounts, runLabel, statusWords } from './status-words.js';

export interface RunsFilter {
  status?: RunStatus;
  workspace?: string;
  sync?: string;
  /** Text in the run id, file name or sync name. */
  q?: string;
  /** 1-based. */
  page: number;
}

export interface RunsPageData {
  runs: RunRecord[];
  total: number;
  pageSize: number;
  filter: RunsFilter;
  workspaces: string[];
  /** With a text search: how many runs were looked through, and whether that was all of them. */
  searched?: { scanned: number; complete: boolean };
}

const STATUS_CHOICES: Array<[RunStatus | '', string]> = [
  ['', 'Any status'],
  ['running', 'Running'],
  ['blocked', 'Blocked'],
  ['completed', 'Completed'],
  ['failed', 'Failed'],
  ['cancelled', 'Cancelled'],
];

/** What the duration words mean, for their tooltip. */
export const DURATION_TIP =
  'Active: the time the passes took. Wall: since the run was created. A retry or resume starts a new pass.';

/** A one-line badge; the detail (problem counts, why it failed) goes under it, the whole sentence in its tooltip. */
export function statusBadge(run: RunRecord): SafeHtml {
  const { text, tone, detail, sentence } = statusWords(run);
  return html`<span class="badge ${tone}" title="${sentence}">${text}</span>${detail !== '' ? html`<div class="detail small">${detail}</div>` : ''}`;
}

export function progressBar(run: RunRecord): SafeHtml | '' {
  if (run.status !== 'running') return '';
  const p = progress(run);
  const pct = p === null ? 0 : Math.round(p * 100);
  return html`<div class="progress"><div class="bar" role="progressbar" aria-valuenow="${pct}" aria-valuemin="0" aria-valuemax="100" title="${pct}% done"><span style="width:${pct}%"></span></div><span class="small">${pct}%</span></div>`;
}

/**
 * The run's results, one line per kind it has (every kind of the run store, none left out, so
 * the lines add up to the rows with a result): a run of unchanged rows says so, not `0 ok`.
 */
export function resultsCell(run: RunRecord): SafeHtml {
  const held = run.options.held;
  if (held !== undefined)
    return html`<div class="kind warn" data-kind="held"><b>${held.rows.toLocaleString('en-US')}</b> rows held${
      held.planId !== undefined
        ? html` in plan <a class="mono" href="/plans/${encodeURIComponent(held.planId)}">${held.planId}</a>`
        : ''
    }</div>`;
  const kinds = resultCounts(run).filter((k) => k.value > 0);
  const waiting = run.counts.queued;
  if (kinds.length === 0 && waiting === 0) return html`<span class="muted">none yet</span>`;
  return html`${kinds.map(
    (k) =>
      html`<div class="kind ${k.tone}" data-kind="${k.kind}" title="${k.tip}"><b>${k.value.toLocaleString('en-US')}</b> ${k.label.toLowerCase()}</div>`,
  )}${waiting > 0 ? html`<div class="kind" data-kind="queued"><b>${waiting.toLocaleString('en-US')}</b> waiting</div>` : ''}`;
}

function runRow(run: RunRecord): SafeHtml {
  const c = run.counts;
  return html`<tr>
  <td class="run"><a href="/runs/${encodeURIComponent(run.id)}" title="${run.source}"><b>${runLabel(run)}</b></a><div class="muted mono small">${run.id}</div></td>
  <td class="wide">${run.workspace}</td>
  <td class="wide">${operationWords(run.operation)}</td>
  <td class="status">${statusBadge(run)}${progressBar(run)}</td>
  <td class="num">${c.total.toLocaleString('en-US')}</td>
  <td class="results">${resultsCell(run)}</td>
  <td class="wide started">${formatTime(run.createdAt)}</td>
  <td class="nowrap" data-duration title="${DURATION_TIP}">${durationParts(run).map((part, i) => (i === 0 ? part : html`<div class="small">${part}</div>`))}</td>
</tr>`;
}

export function runsPageBody(data: RunsPageData): SafeHtml {
  const { filter, total, pageSize } = data;
  const pages = Math.max(1, Math.ceil(total / pageSize));
  const keep = { q: filter.q, status: filter.status, workspace: filter.workspace, sync: filter.sync };
  const first = total === 0 ? 0 : (filter.page - 1) * pageSize + 1;
  const last = Math.min(total, filter.page * pageSize);
  const pager = html`<div class="pager">
  ${filter.page > 1 ? html`<a href="/${query({ ...keep, page: filter.page - 1 })}">← Newer</a>` : ''}
  <span>${total === 0 ? 'No runs' : `Runs ${first.toLocaleString('en-US')}–${last.toLocaleString('en-US')} of ${total.toLocaleString('en-US')}`}</span>
  ${filter.page < pages ? html`<a href="/${query({ ...keep, page: filter.page + 1 })}">Older →</a>` : ''}
</div>`;
  return html`<h1>Runs</h1>
<p class="sub">Every import and nightly sync, newest first. Open a run to see and fix its failed rows.</p>
<div class="actions"><a class="button primary" href="/imports/new">New import</a><a href="/imports">Import history</a></div>
<form class="filters" method="get" action="/">
  <label>Search<input name="q" type="search" value="${filter.q ?? ''}" placeholder="run id, name, file or sync"></label>
  <label>Status<select name="status">${STATUS_CHOICES.map(
    ([value, label]) =>
      html`<option value="${value}"${(filter.status ?? '') === value ? html` selected` : ''}>${label}</option>`,
  )}</select></label>
  <label>Workspace<select name="workspace"><option value="">All workspaces</option>${data.workspaces.map(
    (w) => html`<option value="${w}"${filter.workspace === w ? html` selected` : ''}>${w}</option>`,
  )}</select></label>
  <label>Nightly sync<input name="sync" value="${filter.sync ?? ''}" placeholder="sync name"></label>
  <button type="submit">Filter</button>
  ${filter.q || filter.status || filter.workspace || filter.sync ? html`<a href="/">Clear filters</a>` : ''}
</form>
${data.searched !== undefined && !data.searched.complete ? html`<p class="muted small">Searched the newest ${data.searched.scanned.toLocaleString('en-US')} runs; narrow by status or workspace to look further back.</p>` : ''}
<div class="scroll"><table>
<thead><tr><th>Run</th><th class="wide">Workspace</th><th class="wide">Operation</th><th>Status</th>
<th class="num">Rows</th><th>Results</th><th class="wide">Started</th><th>Duration</th></tr></thead>
<tbody>${data.runs.length === 0 ? html`<tr><td colspan="8" class="muted">No runs match.</td></tr>` : data.runs.map(runRow)}</tbody>
</table></div>
${pager}`;
}
