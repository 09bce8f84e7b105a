import { runShape } from '../crm/index.js';
import { basename } from 'node:path';
import {
  describeError,
  durationWords,
  formatDuration,
  isProblem,
  type ProblemGroups,
  type RowResult,
  type RunRecord,
} from '../runs/index.js';
import { writtenLaterWords, type RetrySummary } from '../lifecycle/index.js';
import { canRetry, errorGroupsSection } from './error-groups.js';
import { html, query, type SafeHtml } from './html.js';
import { isFiltered, type ProblemFilter } from './problem-search.js';
import { DURATION_TIP, progressBar, statusBadge } from './runs-page.js';
import {
  andList,
  formatTime,
  kindLabel,
  kindsWords,
  liveStats,
  operationWords,
  problemCount,
  resultCounts,
  runLabel,
  type CountTone,
} from './status-words.js';

/** A bounded step of an error-text search (problem-search.ts) instead of a page of rows. */
export interface SearchStep {
  scanned: { from: number; to: number };
  /** Problem rows of the run. */
  problems: number;
  next: number | null;
}

export interface RunPageData {
  run: RunRecord;
  /** A page of problems; with a search, `total` is the number of matches shown. */
  problems: { rows: RowResult[]; total: number };
  search?: SearchStep;
  /** 1-based page of the problems table. */
  page: number;
  pageSize: number;
  /** Filters of the problems table (text, result, error group). */
  filter: ProblemFilter;
  /** The run's problems by cause; absent when the run has none. */
  groups?: ProblemGroups;
  csrf: string;
  /** A message about the last action, already rendered. */
  notice?: SafeHtml;
  /** The activity charts (the run's own, its workspace's), already rendered. */
  chart?: SafeHtml;
  /** What keeps the run's rows waiting (no worker, a paused or held workspace), already rendered. */
  presence?: SafeHtml | '';
  /** The workspace is paused or held: rows wait, so no time left is claimed. */
  held?: boolean;
  /** A held sync tick's plan as it is now (heldPlanWords): the run's reason was written while it waited. */
  heldPlan?: { state: string; words: string };
}

function hidden(csrf: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${csrf}">`;
}

function countCard(label: string, value: number, tone: CountTone = '', kind = '', tip = ''): SafeHtml {
  return html`<div class="${tone}" data-kind="${kind}" title="${tip}"><b>${value.toLocaleString('en-US')}</b><span>${label}</span></div>`;
}

/** Rows, one tile per result kind of the run store (none left out: they add up to Rows), Waiting. */
function countTiles(run: RunRecord): SafeHtml {
  const c = run.counts;
  return html`<div class="counts">
  ${countCard('Rows', c.total, '', 'total', 'rows read from the source so far')}${resultCounts(run).map((k) =>
    countCard(k.label, k.value, k.value > 0 || k.kind === 'succeeded' ? k.tone : '', k.kind, k.tip),
  )}${countCard('Waiting', c.queued, '', 'queued', 'queued, no result yet')}
</div>`;
}

function problemColumns(run: RunRecord, rows: RowResult[]): string[] {
  if (run.columns.length > 0) return run.columns;
  const seen = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r.original ?? {})) seen.add(k);
  return [...seen];
}

/** A database run names its rows by key where a file run shows their line. */
function problemRow(r: RowResult, columns: string[]): SafeHtml {
  return html`<tr>
  <td><input type="checkbox" name="row" value="${r.row}" aria-label="Select row ${r.row}"></td>
  <td class="num">${r.row}</td>
  <td class="num">${r.ref ?? r.line ?? ''}</td>
  <td><span class="badge ${r.status === 'invalid' || r.status === 'cancelled' ? 'warn' : 'bad'}">${kindLabel({ options: {} }, r.status)}</span></td>
  <td class="num">${r.httpStatus ?? ''}</td>
  <td class="err">${describeError(r)}${r.code !== undefined ? html` <span class="muted mono">${r.code}</span>` : ''}</td>
  ${columns.map((c) => html`<td>${r.original?.[c] ?? ''}</td>`)}
</tr>`;
}

/** A sync tick held for approval: it sent nothing; its rows are its plan's, and what became of that plan. */
function heldTickNotice(run: RunRecord, heldPlan: RunPageData['heldPlan']): SafeHtml | '' {
  const held = run.options.held;
  if (held === undefined) return '';
  const planId = held.planId;
  const waiting = heldPlan === undefined || heldPlan.state === 'pending' || heldPlan.state === 'approved';
  return html`<div class="notice warn" role="status" data-held="${heldPlan?.state ?? ''}">
  <p><b>Held for approval: this tick of sync “${run.syncName ?? ''}” sent nothing.</b> Its source has ${held.rows.toLocaleString('en-US')} data rows${
    planId !== undefined
      ? html`, planned in plan <a class="mono" href="/plans/${encodeURIComponent(planId)}">${planId}</a>`
      : ''
  }.</p>
  ${heldPlan !== undefined ? html`<p>Now: ${heldPlan.words}.</p>` : ''}
  ${waiting && run.reason !== undefined ? html`<p class="small">${run.reason}</p>` : ''}
  ${planId !== undefined && waiting ? html`<p><a class="button primary" href="/plans/${encodeURIComponent(planId)}">Review the plan</a></p>` : ''}
</div>`;
}

function blockedNotice(run: RunRecord, csrf: string): SafeHtml | '' {
  if (run.status !== 'blocked') return '';
  return html`<div class="notice warn" role="alert">
  <p><b>This run is waiting: the CRM refused the API key of workspace “${run.workspace}”.</b></p>
  ${run.reason !== undefined ? html`<p>${run.reason}</p>` : ''}
  <p>No rows were lost: they wait in the queue. First fix the key, then resume.</p>
  <form method="post" action="/runs/${encodeURIComponent(run.id)}/resume">${hidden(csrf)}<button class="primary" type="submit">Resume workspace ${run.workspace}</button></form>
</div>`;
}

function pagerFor(data: RunPageData): SafeHtml {
  const { run, problems, page, pageSize, search } = data;
  const { q, result, group } = data.filter;
  const keep = { q, result, group };
  const id = encodeURIComponent(run.id);
  const n = (v: number) => v.toLocaleString('en-US');
  if (search !== undefined) {
    const { scanned } = search;
    const looked =
      scanned.to > scanned.from
        ? `Looked through failed rows ${n(scanned.from + 1)}–${n(scanned.to)} of ${n(search.problems)}`
        : '';
    return html`<div class="pager">
  ${scanned.from > 0 ? html`<a href="/runs/${id}${query(keep)}">← From the start</a>` : ''}
  <span>${looked}</span>
  ${search.next !== null ? html`<a href="/runs/${id}${query({ ...keep, from: search.next })}">Search further →</a>` : ''}
</div>`;
  }
  const pages = Math.max(1, Math.ceil(problems.total / pageSize));
  const first = problems.total === 0 ? 0 : (page - 1) * pageSize + 1;
  const last = Math.min(problems.total, page * pageSize);
  return html`<div class="pager">
  ${page > 1 ? html`<a href="/runs/${id}${query({ ...keep, page: page - 1 })}">← Previous</a>` : ''}
  <span>${problems.total === 0 ? '' : `Rows ${n(first)}–${n(last)} of ${n(problems.total)}`}</span>
  ${page < pages ? html`<a href="/runs/${id}${query({ ...keep, page: page + 1 })}">Next →</a>` : ''}
</div>`;
}

/** The kinds the "Retry all" button sends again: problems a correction is not needed for. */
const RETRIED_BY_RETRY_ALL = new Set<string>(['failed', 'uncertain', 'cancelled']);

const RESULT_CHOICES: Array<[string, string]> = [
  ['', 'Any result'],
  ['failed', 'Failed'],
  ['invalid', 'Invalid'],
  ['uncertain', 'Uncertain'],
  ['cancelled', 'Cancelled'],
];

function filtersForm(run: RunRecord, filter: ProblemFilter): SafeHtml {
  const id = encodeURIComponent(run.id);
  return html`<form class="filters" method="get" action="/runs/${id}#problems">
  <label>Result<select name="result">${RESULT_CHOICES.map(
    ([value, label]) =>
      html`<option value="${value}"${(filter.result ?? '') === value ? html` selected` : ''}>${label}</option>`,
  )}</select></label>
  <label>Error contains<input name="q" value="${filter.q ?? ''}" placeholder="e.g. stage"></label>
  ${filter.group !== undefined ? html`<input type="hidden" name="group" value="${filter.group}"><span class="muted">One error group</span>` : ''}
  <button type="submit">Filter</button>
  ${isFiltered(filter) ? html`<a href="/runs/${id}#problems">Clear</a>` : ''}
</form>`;
}

/** `Failed and invalid rows`, or the problem kinds the run has: `Failed, invalid and cancelled rows`. */
function problemsTitle(run: RunRecord): string {
  const kinds = resultCounts(run).filter((k) => isProblem(k.kind) && k.value > 0);
  const words = kinds.length > 0 ? kinds.map((k) => k.label.toLowerCase()) : ['failed', 'invalid'];
  const title = andList(words);
  return `${title.charAt(0).toUpperCase()}${title.slice(1)} rows`;
}

function problemsSection(data: RunPageData): SafeHtml {
  const { run, problems, page, filter, csrf } = data;
  const id = encodeURIComponent(run.id);
  const columns = problemColumns(run, problems.rows);
  const pager = pagerFor(data);
  const further = data.search?.next != null ? ' in the rows looked through so far' : '';
  const filtered = isFiltered(filter);
  const empty = filtered ? `No failed or invalid row matches these filters${further}.` : 'No failed or invalid rows.';
  if (problems.total === 0 && !filtered && page === 1) {
    return html`<h2 id="problems">${problemsTitle(run)}</h2><p class="muted">${empty}</p>`;
  }
  return html`<h2 id="problems">${problemsTitle(run)}</h2>
${filtersForm(run, filter)}
<form method="post" action="/runs/${id}/retry">
${hidden(csrf)}
<div class="scroll"><table>
<thead><tr><th><input type="checkbox" id="select-all" aria-label="Select all rows on this page"></th><th class="num">Row</th><th class="num">${run.options.query?.keyColumn !== undefined ? 'Key' : 'Line'}</th><th>Result</th><th class="num">HTTP</th><th>Error</th>
${columns.map((c) => html`<th>${c}</th>`)}</tr></thead>
<tbody>${problems.rows.length === 0 ? html`<tr><td colspan="${6 + columns.length}" class="muted">${empty}</td></tr>` : problems.rows.map((r) => problemRow(r, columns))}</tbody>
</table></div>
${pager}
${problems.rows.length > 0 && canRetry(run) ? html`<div class="actions"><button type="submit">Retry selected rows</button><span class="muted">Selected rows are sent again as they are; invalid ones stay invalid until corrected.</span></div>` : ''}
</form>`;
}

function liveLine(run: RunRecord, held: boolean): SafeHtml | '' {
  if (run.status !== 'running') return '';
  const s = liveStats(run);
  // Rows of a paused or held workspace wait for an operator or the CRM: no rate holds for them.
  if (held)
    return html`<span class="live" data-live>${s.percent !== null ? html`<b>${s.percent.toLocaleString('en-US')}%</b> · ` : ''}waiting: the workspace is paused or held</span>`;
  const n = (v: number) => v.toLocaleString('en-US', { maximumFractionDigits: 1 });
  return html`<span class="live" data-live>${s.percent !== null ? html`<b>${n(s.percent)}%</b>` : 'starting'}${s.rowsPerSecond !== null ? ` · ${n(s.rowsPerSecond)} rows/s` : ''}${
    s.etaMs !== null
      ? ` · about ${formatDuration(s.etaMs)} left`
      : s.rowsPerSecond !== null && !run.producerDone
        ? ' · still reading the file'
        : ''
  }</span>`;
}

function dryRunNotice(run: RunRecord): SafeHtml | '' {
  if (run.options.dryRun !== true) return '';
  return html`<div class="notice warn"><b>Dry run.</b> Rows were read and validated; nothing was sent to the CRM. “Unchanged” counts the valid rows. There is nothing to retry: fix invalid rows in the file and import it for real.</div>`;
}

/** An applied plan's rows that were not written because someone changed their record since the plan. */
function driftedNotice(run: RunRecord): SafeHtml | '' {
  const n = run.counts.drifted;
  if (n === 0) return '';
  const rows = `${n.toLocaleString('en-US')} row${n === 1 ? '' : 's'}`;
  return html`<div class="notice warn" data-notice="drifted"><b>${rows} drifted:</b> ${n === 1 ? 'its record' : 'their records'} changed since the plan, so ${n === 1 ? 'it was' : 'they were'} not written (nothing was overwritten). The results CSV says the CRM's current values. Retry does not send drifted rows: make a new plan for them (<code>crm-sync plan</code>), review it, approve it.</div>`;
}

function retryAllCard(run: RunRecord, csrf: string): SafeHtml | '' {
  const id = encodeURIComponent(run.id);
  const c = run.counts;
  // What "Retry all" retries (run-routes.ts: every problem row but the invalid ones).
  const kinds = resultCounts(run).filter((k) => k.value > 0 && RETRIED_BY_RETRY_ALL.has(k.kind));
  const sendable = kinds.reduce((sum, k) => sum + k.value, 0);
  const n = (v: number) => v.toLocaleString('en-US');
  const names = andList(kinds.map((k) => k.label.toLowerCase()));
  if (!canRetry(run)) {
    return runShape(run.operation) === 'sync' && problemCount(run) > 0
      ? html`<p class="muted">A reconciled sync is not retried row by row: run the sync again.</p>`
      : '';
  }
  const invalidNote =
    c.invalid > 0
      ? html`<p class="muted">${n(c.invalid)} invalid row${c.invalid === 1 ? ' is' : 's are'} not retried: ${c.invalid === 1 ? 'it needs' : 'they need'} a correction first. Download the failed rows, fix them, upload the file below.</p>`
      : '';
  return html`${sendable > 0 ? html`<form method="post" action="/runs/${id}/retry">${hidden(csrf)}<input type="hidden" name="scope" value="failed"><button class="primary" type="submit" title="${kindsWords(kinds)}">Retry ${n(sendable)} ${names} row${sendable === 1 ? '' : 's'}</button>${RESEND_CHECKBOX}</form>` : ''}
  ${invalidNote}`;
}

/** A run that wrote something, no longer running, and not a dry run: its writes can be planned back. */
function undoable(run: RunRecord): boolean {
  return (
    run.status !== 'running' &&
    run.status !== 'blocked' &&
    run.counts.succeeded > 0 &&
    run.options.dryRun !== true &&
    // An invitation is not taken back: it writes no record (the row shape says so).
    runShape(run.operation) !== 'invite'
  );
}

/** The run an undo run undoes, and the undo runs of this one. */
function undoLinks(run: RunRecord): SafeHtml | '' {
  const link = (id: string) => html`<a class="mono" href="/runs/${encodeURIComponent(id)}">${id}</a>`;
  const of = run.options.undoOf !== undefined ? html`Undoes run ${link(run.options.undoOf)}. ` : '';
  const by = run.undoneBy !== undefined ? html`Undone by run ${run.undoneBy.map(link)}.` : '';
  return of === '' && by === '' ? '' : html`<p class="undo-links">${of}${by}</p>`;
}

/**
 * The run's page. Its actions (cancel, undo, retry, the downloads and the corrected-file upload)
 * come before the activity charts: eight charts put a phone's Retry some 2,000 px down.
 */
export function runPageBody(data: RunPageData): SafeHtml {
  const { run, csrf } = data;
  const id = encodeURIComponent(run.id);
  const problems = problemCount(run);
  const name = runLabel(run);
  // The whole source (a query, a spooled stdin file, a named run's file) under a short name
  // that is not simply the file's name.
  const whole = run.syncName === undefined && name !== basename(run.source) ? run.source : '';
  const retryable = problems > 0 && canRetry(run);
  const cancellable = run.status === 'running' || run.status === 'blocked';
  return html`<p><a href="/">← All runs</a></p>
<h1>${operationWords(run.operation)} · ${name}${run.options.dryRun === true ? html` <span class="badge warn">Dry run</span>` : ''}</h1>
<p class="sub">Run <span class="mono">${run.id}</span> · workspace <b>${run.workspace}</b> · started ${formatTime(run.createdAt)} · <span data-duration title="${DURATION_TIP}">${durationWords(run)}</span></p>
${whole !== '' ? html`<p class="muted small source">Source: <span class="mono">${whole}</span></p>` : ''}
${run.options.plan !== undefined ? html`<p class="plan-link" data-plan="${run.options.plan}">Applies plan <a class="mono" href="/plans/${encodeURIComponent(run.options.plan)}">${run.options.plan}</a>: its rows are the plan's writes, no second diff; a record changed since the plan ends drifted.</p>` : ''}
<div class="actions">${statusBadge(run)} ${progressBar(run)} ${liveLine(run, data.held === true)}
${cancellable ? html`<form method="post" action="/runs/${id}/cancel">${hidden(csrf)}<button class="danger" type="submit">Cancel run</button></form>` : ''}
${undoable(run) ? html`<form method="post" action="/runs/${id}/undo" title="Plans the undo (nothing sent): the values before the run, written back where the CRM still holds what the run wrote; review, approve and apply it on the plan's page">${hidden(csrf)}<button type="submit">Undo…</button></form>` : ''}</div>
${undoLinks(run)}
${data.notice ?? ''}
${data.presence ?? ''}
${dryRunNotice(run)}
${driftedNotice(run)}
${heldTickNotice(run, data.heldPlan)}
${blockedNotice(run, csrf)}
${run.status === 'failed' ? html`<div class="notice bad">${run.reason ?? 'The run failed without a recorded reason.'}</div>` : ''}
${run.options.held === undefined ? countTiles(run) : ''}
<div class="card run-actions">
  <div class="actions">
    <a href="/runs/${id}/results.csv" download>Download all results (CSV)</a>
    <a href="/runs/${id}/results.csv?failed=1" download>Download failed rows (CSV)</a>
    ${retryAllCard(run, csrf)}
  </div>
  ${
    retryable
      ? html`<form method="post" action="/runs/${id}/upload" enctype="multipart/form-data" class="actions upload">
    ${hidden(csrf)}
    <label>Corrected CSV <input type="file" name="file" accept=".csv,text/csv" required></label>
    <button type="submit">Upload and retry</button>${RESEND_CHECKBOX}
    <span class="muted">Download the failed rows, fix them in a spreadsheet, keep the crm_sync_ columns, upload.</span>
  </form>`
      : ''
  }
</div>
${data.chart ?? ''}
${data.groups !== undefined ? errorGroupsSection(run, data.groups, csrf) : ''}
${problemsSection(data)}`;
}

/**
 * Rows a later run has written in full are not sent again unless the operator ticks this
 * (issue 31: a retry that will not send a row says so, and lets the operator choose).
 */
const RESEND_CHECKBOX = html`<label class="muted"><input type="checkbox" name="resendSuperseded" value="1"> also send rows a later run wrote since, over its values</label>`;
export const RESEND_HINT = 'tick "also send rows a later run wrote since" to write them over the later values';

/**
 * The answer to an upload: what was sent again and which lines of the file were not used (the
 * first ones, with their reason, and how many in all).
 */
export function uploadResultBody(
  run: RunRecord,
  retried: number,
  shown: Array<{ row: number | null; line: number; reason: string }>,
  ignoredCount: number,
  writtenLater: RetrySummary['writtenLater'],
): SafeHtml {
  const n = (v: number) => v.toLocaleString('en-US');
  const later = writtenLaterWords(writtenLater, RESEND_HINT);
  return html`<p><a href="/runs/${encodeURIComponent(run.id)}">← Back to the run</a></p>
<h1>Corrected file received</h1>
<div class="notice ${ignoredCount === 0 && writtenLater.skipped === 0 ? 'ok' : 'warn'}">
  ${n(retried)} row${retried === 1 ? '' : 's'} sent again. ${later.join(' ')} ${ignoredCount === 0 ? 'Every line of the file was used.' : `${n(ignoredCount)} line${ignoredCount === 1 ? ' was' : 's were'} ignored:`}
</div>
${
  ignoredCount > 0
    ? html`<div class="scroll"><table><thead><tr><th class="num">Line</th><th class="num">Row</th><th>Why it was ignored</th></tr></thead>
<tbody>${shown.map((i) => html`<tr><td class="num">${i.line}</td><td class="num">${i.row ?? ''}</td><td>${i.reason}</td></tr>`)}</tbody></table></div>
${ignoredCount > shown.length ? html`<p class="muted">… and ${n(ignoredCount - shown.length)} more (only the first ${n(shown.length)} are listed).</p>` : ''}`
    : ''
}
<p><a href="/runs/${encodeURIComponent(run.id)}">Open the run to follow the retry</a></p>`;
}
