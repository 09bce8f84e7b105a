import { OPERATION_TABLE, RECONCILE_OPERATIONS, RESOURCE_TABLE, type ReconcileOperation } from '../crm/index.js';
import {
  COLUMN_TYPES,
  fieldsOf,
  inferType,
  WRITE_POLICIES,
  type ColumnSuggestion,
  type ColumnType,
  type WritePolicy,
} from '../ingest/index.js';
import { writeOperation } from '../reconcile/index.js';
import { REFERENCE_FIELDS } from '../references/index.js';
import type { PlanRecord } from '../plans/index.js';
import type { RunRecord } from '../runs/index.js';
import { html, type SafeHtml } from './html.js';
import { FIRST_INVALID_SHOWN, isStale } from './import-tasks.js';
import type { ImportRecord } from './import-store.js';
import { planBadge } from './plan-pages.js';
import { formatTime, operationWords } from './status-words.js';

const n = (v: number) => v.toLocaleString('en-US');
const hidden = (csrf: string) => html`<input type="hidden" name="_csrf" value="${csrf}">`;

/** Where an import's pages are. */
export function importPath(record: Pick<ImportRecord, 'workspace' | 'id'>, sub = ''): string {
  return `/imports/${encodeURIComponent(record.workspace)}/${encodeURIComponent(record.id)}${sub}`;
}

/** The steps, with the current one marked (`aria-current`), linking back to those already done. */
function steps(record: ImportRecord, current: 'upload' | 'map' | 'check' | 'plan' | 'summary'): SafeHtml {
  const items: Array<[typeof current, string, string | undefined]> = [
    ['upload', '1 Upload', undefined],
    ['map', '2 Map columns', importPath(record, '/mapping')],
    ['check', '3 Check every row', record.check ? importPath(record, '/check') : undefined],
    [
      'plan',
      '4 Plan, approve, apply',
      record.plan?.planId ? `/plans/${encodeURIComponent(record.plan.planId)}` : undefined,
    ],
    ['summary', 'Import', importPath(record)],
  ];
  return html`<ol class="steps">${items.map(
    ([key, label, href]) =>
      html`<li${key === current ? html` aria-current="step" class="current"` : ''}>${href !== undefined && key !== current ? html`<a href="${href}">${label}</a>` : label}</li>`,
  )}</ol>`;
}

/** "How records are found": the match keys each operation takes (the operation table's), and id. */
function matchChoices(op: ReconcileOperation | undefined, chosen: string | undefined): SafeHtml {
  const keysOf = (o: ReconcileOperation) => RESOURCE_TABLE[OPERATION_TABLE[o].resource].matchKeys;
  const all = op !== undefined ? keysOf(op) : [...new Set(RECONCILE_OPERATIONS.flatMap((o) => [...keysOf(o)]))];
  const takes = (key: string) =>
    RECONCILE_OPERATIONS.filter((o) => (keysOf(o) as readonly string[]).includes(key)).join(', ');
  return html`<option value=""${chosen === undefined ? html` selected` : ''}>the operation's default</option>
<option value="id"${chosen === 'id' ? html` selected` : ''}>id column (the CRM's record id)</option>
${all.map((k) => html`<option value="${k}"${chosen === k ? html` selected` : ''}>${k}${op === undefined ? ` (${takes(k)})` : ''}</option>`)}`;
}

export interface NewImportView {
  workspaces: readonly string[];
  csrf: string;
  maxMb: number;
  error?: string;
}

export function newImportBody(v: NewImportView): SafeHtml {
  return html`<h1>New import</h1>
<p class="sub">Upload a CSV, NDJSON or JSON file, map its columns, check every row, then review the plan of exactly what would change before anything is written. Nothing reaches the CRM before you apply the plan.</p>
${v.error !== undefined ? html`<div class="notice bad" role="alert">${v.error}</div>` : ''}
<form class="card import-form" method="post" action="/imports" enctype="multipart/form-data">
${hidden(v.csrf)}
<label>Workspace<select name="workspace" required>${v.workspaces.map((w) => html`<option value="${w}">${w}</option>`)}</select></label>
<label>Operation<select name="op" required>${RECONCILE_OPERATIONS.map((o) => html`<option value="${o}">${operationWords(o)} (${o})</option>`)}</select></label>
<label>Find records by<select name="match">${matchChoices(undefined, undefined)}</select></label>
<label>File (CSV, NDJSON or JSON, up to ${v.maxMb} MB)<input type="file" name="file" accept=".csv,.tsv,.ndjson,.jsonl,.json" required></label>
<p class="small muted">Larger files: <code>crm-sync plan &lt;file&gt; --op &lt;op&gt; -w &lt;workspace&gt; --mapping &lt;mapping.json&gt;</code> reads any size; the mapping downloaded in the next step is that file.</p>
<div class="actions"><button class="primary" type="submit">Upload and map columns</button><a href="/imports">Cancel</a></div>
</form>`;
}

/** A column's choices the table shows beside its field, as the import's or the remembered mapping has them. */
export interface MappingRule {
  type?: ColumnType;
  write?: WritePolicy;
  /** A way from a cell to a value the table does not offer (from an uploaded mapping file): kept as it is. */
  way?: 'lookup file' | 'value map';
}

export interface MappingView {
  record: ImportRecord;
  suggestions: ColumnSuggestion[];
  rules: Record<string, MappingRule>;
  csrf: string;
  error?: string;
  notice?: string;
  /** The suggestions are the import's own mapping (chosen or uploaded), not a remembered one. */
  ownMapping?: boolean;
}

const FROM_WORDS: Record<ColumnSuggestion['from'], string> = {
  remembered: 'last used for these columns',
  'same name': 'same name',
  'did you mean': 'did you mean',
  none: 'no field is close',
};

/**
 * What a reference field's column holds: ids (sent as they are) or names (`"by": "name"`, resolved
 * from the workspace's references). Shown for a column whose field is a reference; the page's
 * script shows and hides it as the field changes (without it, the table shows it once posted).
 */
function holdsCell(s: ColumnSuggestion, i: number, rule: MappingRule, label: string): SafeHtml {
  if (rule.way !== undefined)
    return html`<td class="holds" data-label="Holds"><span class="small muted">by ${rule.way}</span></td>`;
  const reference = s.field !== null && REFERENCE_FIELDS[s.field] !== undefined;
  return html`<td class="holds${reference ? '' : ' none'}" data-label="Holds"><select name="by_${i}" aria-label="What ${label} holds"${reference ? '' : html` hidden`}>
    <option value=""${s.by === undefined ? html` selected` : ''}>ids</option>
    <option value="name"${s.by === 'name' ? html` selected` : ''}>names</option>
  </select><span class="dash muted" aria-hidden="true">—</span></td>`;
}

/**
 * One line of the mapping table. Each per-column choice is a cell of its own, named `<choice>_<i>`
 * (field_3, type_3, write_3, by_3) and read back by mappingFromForm: a new choice is one more cell
 * here, one more heading in the header, and its key in mappingFromForm.
 */
function mappingLine(record: ImportRecord, s: ColumnSuggestion, i: number, v: MappingView): SafeHtml {
  const fields = fieldsOf(writeOperation(record.op));
  const rule = v.rules[s.column] ?? {};
  const values = (record.samples[s.column] ?? []).slice(0, 3);
  const label = `column ${s.column}`;
  return html`<tr data-column="${s.column}">
  <th scope="row" class="col-name">${s.column}</th>
  <td class="samples" data-label="First values">${values.length === 0 ? html`<span class="muted">—</span>` : values.map((x) => html`<div class="mono">${x === '' ? html`<span class="muted">(empty)</span>` : x}</div>`)}</td>
  <td data-label="Field"><select name="field_${i}" aria-label="Field for ${label}" data-from="${s.from}">
    <option value=""${s.field === null ? html` selected` : ''}>skip this column</option>
    ${fields.map((f) => html`<option value="${f}"${s.field === f ? html` selected` : ''}>${f}</option>`)}
  </select><div class="small muted">${s.from === 'remembered' && v.ownMapping === true ? 'as chosen' : FROM_WORDS[s.from]}</div></td>
  <td data-label="Type"><select name="type_${i}" aria-label="Type for ${label}">
    <option value="">as the field (${s.field !== null ? inferType(s.field) : 'string'})</option>
    ${COLUMN_TYPES.map((t) => html`<option value="${t}"${rule.type === t ? html` selected` : ''}>${t}</option>`)}
  </select></td>
  <td data-label="Write policy"><select name="write_${i}" aria-label="Write policy for ${label}">
    ${WRITE_POLICIES.map((w) => html`<option value="${w}"${(rule.write ?? 'always') === w ? html` selected` : ''}>${w}</option>`)}
  </select></td>
  ${holdsCell(s, i, rule, label)}
</tr>`;
}

export function mappingBody(v: MappingView): SafeHtml {
  const r = v.record;
  return html`<h1 class="plan-title">Map columns · ${r.fileName}</h1>
${steps(r, 'map')}
<p class="sub">${operationWords(r.op)} in workspace <b>${r.workspace}</b> · ${n(r.columns.length)} columns. Choose the API field each column fills, or skip it; the suggestion is the mapping last used in this workspace for the same columns, else a field of the same name, else the nearest name.</p>
${v.error !== undefined ? html`<div class="notice bad" role="alert">${v.error}</div>` : ''}
${v.notice !== undefined ? html`<div class="notice ok">${v.notice}</div>` : ''}
<form method="post" action="${importPath(r, '/mapping')}">
${hidden(v.csrf)}
<div class="scroll"><table class="mapping cards" data-reference-fields="${Object.keys(REFERENCE_FIELDS).join(' ')}">
<thead><tr><th>Column</th><th>First values</th><th>Field</th><th>Type</th><th>Write policy</th><th>Holds</th></tr></thead>
<tbody>${v.suggestions.map((s, i) => mappingLine(r, s, i, v))}</tbody>
</table></div>
<p><label>Find records by <select name="match">${matchChoices(r.op, r.matchKey)}</select></label>
<span class="small muted">rows with an id (a column mapped to id) are found by it; the others by this key</span></p>
<div class="actions"><button class="primary" type="submit">Check every row</button>
<a href="${importPath(r, '/mapping.json')}" download>Download mapping (JSON)</a></div>
</form>
<form class="card upload" method="post" action="${importPath(r, '/mapping/file')}" enctype="multipart/form-data">
${hidden(v.csrf)}
<label>Fill the table from a mapping file (the JSON <code>--mapping</code> takes) <input type="file" name="file" accept=".json,application/json" required></label>
<button type="submit">Use this mapping file</button>
</form>`;
}

/** A bar of `done` of `total`; with no total known (a list's length), one that says only that it goes on. */
function progressLine(done: number, total: number, words: string): SafeHtml {
  if (total <= 0)
    return html`<div class="progress" role="status"><progress aria-label="${words}"></progress> <span>${words}</span></div>`;
  const pct = Math.min(100, Math.round((done / total) * 100));
  return html`<div class="progress" role="status"><progress max="100" value="${pct}" aria-label="${words}">${pct}%</progress> <span>${words}</span></div>`;
}

export function checkBody(record: ImportRecord, csrf: string): SafeHtml {
  const c = record.check;
  const head = html`<h1 class="plan-title">Check every row · ${record.fileName}</h1>${steps(record, 'check')}`;
  const back = html`<a href="${importPath(record, '/mapping')}">Change the mapping</a>`;
  if (c === undefined) return html`${head}<p>Not checked yet. ${back}</p>`;
  if (c.state === 'running') {
    const stale = isStale(c);
    return html`${head}
${progressLine(c.bytesRead, c.totalBytes, `${n(c.rows)} rows checked (${Math.round(c.bytesRead / 1048576)} of ${Math.max(1, Math.round(c.totalBytes / 1048576))} MB)`)}
${stale ? html`<div class="notice warn">The check stopped answering (its dashboard process may have restarted). ${back} and check again.</div>` : html`<p class="muted">Every row is read and checked; this page updates itself.</p>`}`;
  }
  if (c.state === 'failed')
    return html`${head}<div class="notice bad" role="alert" data-check="failed"><p><b>The file cannot be imported with this mapping.</b></p><p>${c.error ?? ''}</p></div><div class="actions">${back}</div>`;
  const invalid = c.invalid ?? 0;
  const valid = c.valid ?? 0;
  const groups =
    c.groups.length === 0
      ? ''
      : html`<h2 id="groups">Errors by cause</h2>
<div class="scroll"><table class="groups cards">
<thead><tr><th class="num">Rows</th><th>Cause (values masked)</th><th>First rows</th></tr></thead>
<tbody>${c.groups.map(
          (g) =>
            html`<tr data-group="${g.key}"><td class="num"><b>${n(g.count)}</b></td><td class="err">${g.message}${g.code !== '' ? html` <span class="muted mono">${g.code}</span>` : ''}</td><td>${g.rows.join(', ')}</td></tr>`,
        )}</tbody></table></div>
${c.otherRows > 0 ? html`<p class="muted small">${n(c.otherRows)} more rows have other causes.</p>` : ''}`;
  const first =
    c.firstInvalid.length === 0
      ? ''
      : html`<h2 id="invalid">First invalid rows</h2>
<div class="scroll"><table class="invalid-rows">
<thead><tr><th class="num">Row</th><th class="num">Line</th><th>Column</th><th>Reason</th></tr></thead>
<tbody>${c.firstInvalid.map(
          (x) =>
            html`<tr data-row="${x.row}"><td class="num">${x.row}</td><td class="num">${x.line}</td><td>${x.column}</td><td class="err">${x.reason}</td></tr>`,
        )}</tbody></table></div>
${invalid > 0 ? html`<p class="small muted">The first ${FIRST_INVALID_SHOWN} reasons are listed; the CSV has every invalid row.</p>` : ''}`;
  return html`${head}
<div class="counts" data-check="done"><div class="ok" data-kind="valid"><b>${n(valid)}</b><span>${n(valid)} valid</span></div><div class="${invalid > 0 ? 'bad' : ''}" data-kind="invalid"><b>${n(invalid)}</b><span>${n(invalid)} invalid</span></div><div data-kind="rows"><b>${n(c.rows)}</b><span>rows</span></div></div>
<p>${invalid > 0 ? html`Invalid rows are not sent: the plan lists them as <b>invalid</b> (or <b>not-found</b>, when their key matches no record). Correct the file and upload it again, or change the mapping and check again.` : html`Every row can be sent. Whether each one finds its record, and what it changes, the plan says (it reads the CRM; nothing is written).`}</p>
<div class="actions">
<form method="post" action="${importPath(record, '/plan')}">${hidden(csrf)}<button class="primary" type="submit">Make the plan</button></form>
${back}
${invalid > 0 ? html`<a href="${importPath(record, '/invalid.csv')}" download>Download invalid rows (CSV)</a>` : ''}
</div>
${groups}${first}`;
}

export function planningBody(record: ImportRecord): SafeHtml {
  const p = record.plan;
  const head = html`<h1 class="plan-title">Making the plan · ${record.fileName}</h1>${steps(record, 'plan')}`;
  if (p === undefined) return html`${head}<p>No plan yet.</p>`;
  if (p.state === 'failed')
    return html`${head}<div class="notice bad" role="alert"><p><b>The plan could not be made.</b></p><p>${p.error ?? ''}</p></div><div class="actions"><a href="${importPath(record, '/check')}">Back to the check</a></div>`;
  return html`${head}
${progressLine(p.pages, 0, `${n(p.pages)} list pages of the CRM read, in the workspace's rate budget`)}
${isStale(p) ? html`<div class="notice warn">Making the plan stopped answering (its dashboard process may have restarted). <a href="${importPath(record, '/check')}">Back to the check</a> to make it again.</div>` : html`<p class="muted">The CRM's records are read to match every row; nothing is written. This page opens the plan when it is made.</p>`}`;
}

/** The import's state in a few words (the history list, the import page). */
export function importResult(record: ImportRecord, plan: PlanRecord | null, run: RunRecord | null): SafeHtml {
  if (run !== null) {
    const c = run.counts;
    return html`<span data-result="run">run <a class="mono" href="/runs/${encodeURIComponent(run.id)}">${run.id}</a> ${run.status}: ${n(c.succeeded)} succeeded${c.failed > 0 ? `, ${n(c.failed)} failed` : ''}${c.invalid > 0 ? `, ${n(c.invalid)} invalid` : ''}${run.undoneBy !== undefined ? ' · undone' : ''}</span>`;
  }
  if (record.discarded !== undefined) return html`<span data-result="discarded">discarded</span>`;
  if (plan !== null)
    return html`<span data-result="plan">${planBadge(plan)} <a href="/plans/${encodeURIComponent(plan.id)}">plan</a></span>`;
  if (record.plan?.state === 'running') return html`<span data-result="planning">making the plan</span>`;
  const c = record.check;
  if (c?.state === 'done')
    return html`<span data-result="checked">checked: ${n(c.valid ?? 0)} valid, ${n(c.invalid ?? 0)} invalid</span>`;
  if (c?.state === 'failed') return html`<span data-result="refused">refused by the check</span>`;
  return html`<span data-result="uploaded">uploaded, not checked</span>`;
}

export interface HistoryLine {
  record: ImportRecord;
  plan: PlanRecord | null;
  run: RunRecord | null;
}

export function historyBody(lines: HistoryLine[]): SafeHtml {
  return html`<h1>Imports</h1>
<p class="sub">Files imported from the browser, newest first: who uploaded which file, and what became of it. A file is kept until its plan expires (or the import is discarded), then removed; the history stays 30 days.</p>
<div class="actions"><a class="button primary" href="/imports/new">New import</a></div>
<div class="scroll"><table class="imports">
<thead><tr><th>File</th><th class="wide">Workspace</th><th>By</th><th class="wide">Uploaded</th><th>Result</th></tr></thead>
<tbody>${
    lines.length === 0
      ? html`<tr><td colspan="5" class="muted">No imports yet.</td></tr>`
      : lines.map(
          (l) =>
            html`<tr data-import="${l.record.id}"><td class="run"><a href="${importPath(l.record)}"><b>${l.record.fileName}</b></a><div class="small muted">${operationWords(l.record.op)} · ${n(l.record.columns.length)} columns</div></td><td class="wide">${l.record.workspace}</td><td class="approver">${l.record.by}</td><td class="wide started">${formatTime(l.record.createdAt)}</td><td>${importResult(l.record, l.plan, l.run)}</td></tr>`,
        )
  }</tbody></table></div>`;
}

export function importBody(line: HistoryLine, csrf: string): SafeHtml {
  const { record: r, plan, run } = line;
  const mapping = r.mapping as { columns?: Record<string, unknown> } | undefined;
  const discardable =
    r.discarded === undefined &&
    !r.fileRemoved &&
    (plan === null || plan.status === 'pending' || plan.status === 'approved');
  return html`<h1 class="plan-title">Import · ${r.fileName}</h1>
${steps(r, 'summary')}
<p class="sub">${operationWords(r.op)} in workspace <b>${r.workspace}</b>, records found by <b>${r.matchKey}</b> · uploaded ${formatTime(r.createdAt)} by <b>${r.by}</b> · ${n(r.bytes)} bytes · ${r.fileRemoved ? 'file removed' : html`file kept until ${formatTime(new Date(r.expiresMs).toISOString())}`}</p>
<p>${importResult(r, plan, run)}</p>
<div class="actions">
${run !== null ? html`<a href="/runs/${encodeURIComponent(run.id)}">Open the run (progress, errors, Undo)</a>` : ''}
${plan !== null ? html`<a href="/plans/${encodeURIComponent(plan.id)}">Open the plan</a>` : ''}
${r.check !== undefined ? html`<a href="${importPath(r, '/check')}">The check</a>` : ''}
${!r.fileRemoved && run === null ? html`<a href="${importPath(r, '/mapping')}">Map columns</a>` : ''}
${r.mapping !== undefined ? html`<a href="${importPath(r, '/mapping.json')}" download>Download mapping (JSON)</a>` : ''}
${discardable ? html`<form method="post" action="${importPath(r, '/discard')}">${hidden(csrf)}<button class="danger" type="submit">Discard import</button></form>` : ''}
</div>
<h2>Mapping</h2>
${
  mapping?.columns === undefined
    ? html`<p class="muted">No mapping chosen yet.</p>`
    : html`<div class="scroll"><table><thead><tr><th>Column</th><th>Field</th></tr></thead><tbody>${Object.entries(
        mapping.columns,
      ).map(
        ([column, target]) =>
          html`<tr><td>${column}</td><td class="mono">${target === null ? 'skipped' : typeof target === 'string' ? target : JSON.stringify(target)}</td></tr>`,
      )}</tbody></table></div>`
}`;
}
