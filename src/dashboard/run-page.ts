import { basename } from 'node:path';
import { describeError, type RowResult, type RunRecord } from '../runs/index.js';
import { html, query, type SafeHtml } from './html.js';
import { progressBar, statusBadge } from './runs-page.js';
import { formatDuration, formatTime, operationWords, problemCount, runDurationMs } from './status-words.js';

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
  /** Error-text filter of the problems table ('' = none). */
  q: string;
  csrf: string;
  /** A message about the last action, already rendered. */
  notice?: SafeHtml;
}

function hidden(csrf: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${csrf}">`;
}

function countCard(label: string, value: number, tone = ''): SafeHtml {
  return html`<div class="${tone}"><b>${value.toLocaleString('en-US')}</b><span>${label}</span></div>`;
}

function problemColumns(run: RunRecord, rows: RowResult[]): string[] {
  if (run.columns.length > 0) return run.columns;
  const seen = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r.original ?? {})) seen.add(k);
  return [...seen];
}

function problemRow(r: RowResult, columns: string[]): SafeHtml {
  return html`<tr>
  <td><input type="checkbox" name="row" value="${r.row}" aria-label="Select row ${r.row}"></td>
  <td class="num">${r.row}</td>
  <td class="num">${r.line ?? ''}</td>
  <td>${r.status === 'invalid' ? html`<span class="badge warn">Invalid</span>` : html`<span class="badge bad">Failed</span>`}</td>
  <td class="num">${r.httpStatus ?? ''}</td>
  <td class="err">${describeError(r)}${r.code !== undefined ? html` <span class="muted mono">${r.code}</span>` : ''}</td>
  ${columns.map((c) => html`<td>${r.original?.[c] ?? ''}</td>`)}
</tr>`;
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
  const { run, problems, page, pageSize, q, search } = data;
  const id = encodeURIComponent(run.id);
  const n = (v: number) => v.toLocaleString('en-US');
  if (search !== undefined) {
    const { scanned } = search;
    const looked = scanned.to > scanned.from ? `Looked through failed rows ${n(scanned.from + 1)}–${n(scanned.to)} of ${n(search.problems)}` : '';
    return html`<div class="pager">
  ${scanned.from > 0 ? html`<a href="/runs/${id}${query({ q })}">← From the start</a>` : ''}
  <span>${looked}</span>
  ${search.next !== null ? html`<a href="/runs/${id}${query({ q, from: search.next })}">Search further →</a>` : ''}
</div>`;
  }
  const pages = Math.max(1, Math.ceil(problems.total / pageSize));
  const first = problems.total === 0 ? 0 : (page - 1) * pageSize + 1;
  const last = Math.min(problems.total, page * pageSize);
  return html`<div class="pager">
  ${page > 1 ? html`<a href="/runs/${id}${query({ q, page: page - 1 })}">← Previous</a>` : ''}
  <span>${problems.total === 0 ? '' : `Rows ${n(first)}–${n(last)} of ${n(problems.total)}`}</span>
  ${page < pages ? html`<a href="/runs/${id}${query({ q, page: page + 1 })}">Next →</a>` : ''}
</div>`;
}

function problemsSection(data: RunPageData): SafeHtml {
  const { run, problems, page, q, csrf } = data;
  const id = encodeURIComponent(run.id);
  const columns = problemColumns(run, problems.rows);
  const pager = pagerFor(data);
  const further = data.search?.next != null ? ' in the rows looked through so far' : '';
  const empty = q !== '' ? `No failed or invalid row matches that text${further}.` : 'No failed or invalid rows.';
  if (problems.total === 0 && q === '' && page === 1) {
    return html`<h2 id="problems">Failed and invalid rows</h2><p class="muted">${empty}</p>`;
  }
  return html`<h2 id="problems">Failed and invalid rows</h2>
<form class="filters" method="get" action="/runs/${id}">
  <label>Error contains<input name="q" value="${q}" placeholder="e.g. stage"></label>
  <button type="submit">Filter</button>
  ${q !== '' ? html`<a href="/runs/${id}">Clear</a>` : ''}
</form>
<form method="post" action="/runs/${id}/retry">
${hidden(csrf)}
<div class="scroll"><table>
<thead><tr><th><input type="checkbox" id="select-all" aria-label="Select all rows on this page"></th><th class="num">Row</th><th class="num">Line</th><th>Result</th><th class="num">HTTP</th><th>Error</th>
${columns.map((c) => html`<th>${c}</th>`)}</tr></thead>
<tbody>${problems.rows.length === 0 ? html`<tr><td colspan="${6 + columns.length}" class="muted">${empty}</td></tr>` : problems.rows.map((r) => problemRow(r, columns))}</tbody>
</table></div>
${pager}
${problems.rows.length > 0 ? html`<div class="actions"><button type="submit">Retry selected rows</button><span class="muted">Selected rows are sent again as they are.</span></div>` : ''}
</form>`;
}

export function runPageBody(data: RunPageData): SafeHtml {
  const { run, csrf } = data;
  const id = encodeURIComponent(run.id);
  const c = run.counts;
  const problems = problemCount(run);
  const name = run.syncName !== undefined ? `Nightly sync “${run.syncName}”` : basename(run.source);
  const retryable = problems > 0 && run.operation !== 'deal.upsert' && run.options.dryRun !== true;
  return html`<p><a href="/">← All runs</a></p>
<h1>${operationWords(run.operation)} · ${name}</h1>
<p class="sub">Run <span class="mono">${run.id}</span> · workspace <b>${run.workspace}</b> · started ${formatTime(run.createdAt)} · ${run.finishedAt !== undefined ? `took ${formatDuration(runDurationMs(run))}` : `running for ${formatDuration(runDurationMs(run))}`}</p>
<p>${statusBadge(run)} ${progressBar(run)}</p>
${data.notice ?? ''}
${blockedNotice(run, csrf)}
${run.status === 'failed' && run.reason !== undefined ? html`<div class="notice bad">${run.reason}</div>` : ''}
<div class="counts">
  ${countCard('Rows', c.total)}${countCard('Succeeded', c.succeeded, 'ok')}${countCard('Unchanged', c.skipped)}
  ${countCard('Failed', c.failed, c.failed > 0 ? 'bad' : '')}${countCard('Invalid', c.invalid, c.invalid > 0 ? 'bad' : '')}${countCard('Waiting', c.queued)}
  ${c.superseded > 0 ? countCard('Superseded', c.superseded) : ''}${c.uncertain > 0 ? countCard('Uncertain', c.uncertain, 'bad') : ''}
</div>
<div class="card">
  <div class="actions">
    <a href="/runs/${id}/results.csv" download>Download all results (CSV)</a>
    <a href="/runs/${id}/results.csv?failed=1" download>Download failed rows (CSV)</a>
    ${retryable ? html`<form method="post" action="/runs/${id}/retry">${hidden(csrf)}<button class="primary" type="submit">Retry all ${problems.toLocaleString('en-US')} failed rows</button></form>` : ''}
  </div>
  ${retryable ? html`<form method="post" action="/runs/${id}/upload" enctype="multipart/form-data" class="actions" style="margin-top:12px">
    ${hidden(csrf)}
    <label>Corrected CSV <input type="file" name="file" accept=".csv,text/csv" required></label>
    <button type="submit">Upload and retry</button>
    <span class="muted">Download the failed rows, fix them in a spreadsheet, keep the crm_sync_ columns, upload.</span>
  </form>` : ''}
</div>
${problemsSection(data)}`;
}

/**
 * The answer to an upload: what was sent again and which lines of the file were not used (the
 * first ones, with their reason, and how many in all).
 */
export function uploadResultBody(run: RunRecord, retried: number, shown: Array<{ row: number | null; line: number; reason: string }>, ignoredCount: number): SafeHtml {
  const n = (v: number) => v.toLocaleString('en-US');
  return html`<p><a href="/runs/${encodeURIComponent(run.id)}">← Back to the run</a></p>
<h1>Corrected file received</h1>
<div class="notice ${ignoredCount === 0 ? 'ok' : 'warn'}">
  ${n(retried)} row${retried === 1 ? '' : 's'} sent again. ${ignoredCount === 0 ? 'Every line of the file was used.' : `${n(ignoredCount)} line${ignoredCount === 1 ? ' was' : 's were'} ignored:`}
</div>
${ignoredCount > 0 ? html`<div class="scroll"><table><thead><tr><th class="num">Line</th><th class="num">Row</th><th>Why it was ignored</th></tr></thead>
<tbody>${shown.map((i) => html`<tr><td class="num">${i.line}</td><td class="num">${i.row ?? ''}</td><td>${i.reason}</td></tr>`)}</tbody></table></div>
${ignoredCount > shown.length ? html`<p class="muted">… and ${n(ignoredCount - shown.length)} more (only the first ${n(shown.length)} are listed).</p>` : ''}` : ''}
<p><a href="/runs/${encodeURIComponent(run.id)}">Open the run to follow the retry</a></p>`;
}
