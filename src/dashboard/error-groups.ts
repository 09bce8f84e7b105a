import { runShape } from '../crm/index.js';
import type { ProblemGroups, RunRecord } from '../runs/index.js';
import { html, query, type SafeHtml } from './html.js';

const RESULT_WORDS = { failed: 'Failed', invalid: 'Invalid', uncertain: 'Uncertain', cancelled: 'Cancelled' } as const;

/** Whether rows of this run can be sent again from the dashboard at all. */
export function canRetry(run: RunRecord): boolean {
  return runShape(run.operation) !== 'sync' && run.options.dryRun !== true;
}

/**
 * What to do about a group the worker failed for good (ProblemGroup.permanent): sent again as
 * they are its rows get the same answer, so the page offers the fix, not a retry.
 */
function permanentRemedy(code: string): string {
  const then = 'download its CSV, correct it, send it with Upload and retry';
  if (code === 'CRM_NOT_FOUND')
    return `Not retried: the CRM has no record with that id. Fix the id in the file: ${then}.`;
  if (code === 'CRM_REJECTED') return `Not retried: the CRM refuses these values. Fix them in the file: ${then}.`;
  return `Not retried: the same request gets the same answer. Check the record in the CRM, then fix the file: ${then}.`;
}

/**
 * The run's problems by cause, largest first: one line per (result, code, masked message), with
 * links to its rows and its CSV and, for failed rows, a retry of the group. Invalid rows, and failed
 * ones whose error is permanent (a 404, a refusal), are never offered a retry: they would fail
 * again until the file is corrected. On a phone the table is a list of cards (`table.cards`), so
 * a group's actions are on screen, not at the right end of a scrolled box.
 */
export function errorGroupsSection(run: RunRecord, grouped: ProblemGroups, csrf: string): SafeHtml {
  if (grouped.groups.length === 0) return html``;
  const id = encodeURIComponent(run.id);
  const n = (v: number) => v.toLocaleString('en-US');
  const retry = canRetry(run);
  const line = (g: ProblemGroups['groups'][number]) => html`<tr data-group="${g.key}">
  <td class="num"><b>${n(g.count)}</b></td>
  <td class="result"><span class="badge ${g.status === 'invalid' ? 'warn' : 'bad'}">${RESULT_WORDS[g.status]}</span></td>
  <td class="err">${g.message}${g.code !== '' ? html` <span class="muted mono">${g.code}</span>` : ''}</td>
  <td class="nowrap"><div class="actions">
    <a href="/runs/${id}${query({ group: g.key })}#problems">Show rows</a>
    <a href="/runs/${id}/results.csv${query({ group: g.key })}" download>CSV</a>
    ${
      g.status === 'invalid'
        ? html`<span class="muted small">Correct the file first</span>`
        : g.permanent
          ? html`<span class="muted small" data-permanent>${permanentRemedy(g.code)}</span>`
          : retry
            ? html`<form method="post" action="/runs/${id}/retry"><input type="hidden" name="_csrf" value="${csrf}"><input type="hidden" name="group" value="${g.key}"><button type="submit">Retry ${n(g.count)} ${RESULT_WORDS[g.status].toLowerCase()} row${g.count === 1 ? '' : 's'}</button></form>`
            : ''
    }
  </div></td>
</tr>`;
  const partial = grouped.complete
    ? ''
    : html`<p class="muted small">Grouped the first ${n(grouped.scanned)} problem rows; download the failed rows for the rest.</p>`;
  const other =
    grouped.otherRows > 0
      ? html`<p class="muted small">${n(grouped.otherRows)} more rows have other causes (only the first ${n(grouped.groups.length)} causes are listed).</p>`
      : '';
  return html`<h2 id="groups">Errors by cause</h2>
<div class="scroll"><table class="groups cards">
<thead><tr><th class="num">Rows</th><th>Result</th><th>Cause (values masked)</th><th></th></tr></thead>
<tbody>${grouped.groups.map(line)}</tbody>
</table></div>
${partial}${other}`;
}
