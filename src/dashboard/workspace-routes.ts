import type { FastifyInstance } from 'fastify';
import { CrmSyncError } from '../errors/index.js';
import { pauseWorkspace, unpauseWorkspace, workerCount } from '../queue/index.js';
import type { HoldKind, WorkspaceHold } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { formTokenFor, formTokenGuard } from './auth-hooks.js';
import { workspaceChart } from './activity-chart.js';
import { html, type SafeHtml } from './html.js';
import { sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import { queueDepth, type QueueDepth } from './queue-depth.js';
import type { SessionAuth } from './session-auth.js';

export interface WorkspaceRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  workspaces: string[];
}

interface WorkspaceState {
  name: string;
  /**
   * Rows of the workspace's running and blocked runs still without a result: the rows the run
   * page calls Waiting. The queue's own numbers count jobs, which hold up to rowsPerJob rows.
   */
  waitingRows: number;
  depth: QueueDepth;
  blockedRuns: number;
  runningRuns: number;
  holds: Partial<Record<HoldKind, WorkspaceHold>>;
  /** Worker connections serving the queue (-1: Redis refused CLIENT LIST). */
  workers: number;
}

function stateWords(s: WorkspaceState): SafeHtml {
  if (s.blockedRuns > 0 || s.holds.blocked) return html`<span class="badge blocked">Paused — API key refused</span>`;
  if (s.holds.paused)
    return html`<span class="badge warn">Paused</span><div class="muted">${s.holds.paused.reason}</div>`;
  if (s.holds.unreachable)
    return html`<span class="badge bad">Held — CRM unreachable</span><div class="muted">${s.holds.unreachable.reason}</div>`;
  if (s.depth.paused) return html`<span class="badge warn">Paused</span>`;
  return html`<span class="badge ok">Active</span>`;
}

function workersWords(s: WorkspaceState): SafeHtml {
  if (s.workers < 0) return html`<span class="muted">unknown</span>`;
  if (s.workers > 0) return html`${s.workers}`;
  return html`<b>none</b><div class="muted">Rows wait until one starts: <code>crm-sync worker -w ${s.name}</code></div>`;
}

/** The queue's jobs, apart from the rows: `3 waiting · 4 in progress · 1 delayed · 0 given up`. */
function jobWords(d: QueueDepth): string {
  const n = (v: number) => v.toLocaleString('en-US');
  return `${n(d.waiting)} waiting · ${n(d.active)} in progress · ${n(d.delayed)} delayed · ${n(d.failed)} given up`;
}

/** Runs of one status summed per page; more running or blocked runs than this at once is not seen. */
const RUNS_SUMMED = 500;

/** Pause or Resume is next to the name: at the table's right end a phone's screen never shows it. */
function workspaceRow(s: WorkspaceState, csrf: string): SafeHtml {
  const name = encodeURIComponent(s.name);
  const action = s.depth.paused
    ? html`<form method="post" action="/workspaces/${name}/resume"><input type="hidden" name="_csrf" value="${csrf}"><button class="primary" type="submit">Resume</button></form>`
    : html`<form method="post" action="/workspaces/${name}/pause"><input type="hidden" name="_csrf" value="${csrf}"><button type="submit">Pause</button></form>`;
  return html`<tr>
  <td><b>${s.name}</b></td>
  <td><div class="actions">${action}</div></td>
  <td>${stateWords(s)}${s.blockedRuns > 0 ? html`<div class="muted">Fix the API key first, then resume.</div>` : ''}</td>
  <td class="num" data-waiting-rows>${s.waitingRows.toLocaleString('en-US')}</td>
  <td class="small">${jobWords(s.depth)}</td>
  <td class="num"><a href="/?workspace=${name}&amp;status=running">${s.runningRuns}</a></td>
  <td class="num"><a href="/?workspace=${name}&amp;status=blocked">${s.blockedRuns}</a></td>
  <td class="num">${workersWords(s)}</td>
</tr>`;
}

export function registerWorkspaceRoutes(app: FastifyInstance, options: WorkspaceRoutesOptions): void {
  const { runtime, auth, workspaces } = options;
  const known = (name: string): string => {
    if (!workspaces.includes(name))
      throw new CrmSyncError('WORKSPACE_UNKNOWN', `workspace "${name}" is not served by this dashboard`);
    return name;
  };

  app.get('/workspaces', async (request, reply) => {
    const states: WorkspaceState[] = await Promise.all(
      workspaces.map(async (name) => {
        const [depth, blocked, running, holds, workers] = await Promise.all([
          queueDepth(runtime.queue(name)),
          runtime.store.listRuns({ workspace: name, status: 'blocked', limit: RUNS_SUMMED }),
          runtime.store.listRuns({ workspace: name, status: 'running', limit: RUNS_SUMMED }),
          runtime.store.holds(name),
          workerCount(runtime.redis, runtime.config.prefix, name),
        ]);
        const waitingRows = [...blocked.runs, ...running.runs].reduce((sum, r) => sum + r.counts.queued, 0);
        return { name, waitingRows, depth, blockedRuns: blocked.total, runningRuns: running.total, holds, workers };
      }),
    );
    if (wantsJson(request)) return { workspaces: states };
    const csrf = formTokenFor(auth, request);
    const charts = await Promise.all(workspaces.map((name) => workspaceChart(runtime, name)));
    const anyRunning = states.some((s) => s.runningRuns > 0);
    const body = html`<h1>Workspaces</h1>
<p class="sub">One queue per workspace. Pausing stops every worker from taking that workspace's rows; nothing is lost, rows wait until you resume.</p>
<div class="scroll"><table>
<thead><tr><th>Workspace</th><th></th><th>State</th><th class="num" title="rows of running and blocked runs without a result yet">Waiting rows</th><th title="queue jobs: each holds one row, or up to rowsPerJob updates">Queue jobs</th><th class="num">Running runs</th><th class="num">Blocked runs</th><th class="num">Workers</th></tr></thead>
<tbody>${states.length === 0 ? html`<tr><td colspan="8" class="muted">No workspaces configured.</td></tr>` : states.map((s) => workspaceRow(s, csrf))}</tbody>
</table></div>
${charts}`;
    return sendPage(
      reply,
      page({
        title: 'Workspaces',
        body,
        nav: 'workspaces',
        canSignOut: !auth.insecure,
        csrf,
        ...(anyRunning ? { refreshSeconds: 5 } : {}),
        charts: true,
      }),
    );
  });

  app.post<{ Params: { name: string } }>(
    '/workspaces/:name/pause',
    { preHandler: formTokenGuard(auth) },
    async (request, reply) => {
      const name = known(request.params.name);
      await pauseWorkspace({
        queue: runtime.queue(name),
        store: runtime.store,
        workspace: name,
        reason: 'paused from the dashboard',
      });
      if (wantsJson(request)) return { workspace: name, paused: true };
      return reply.redirect('/workspaces', 303);
    },
  );

  app.post<{ Params: { name: string } }>(
    '/workspaces/:name/resume',
    { preHandler: formTokenGuard(auth) },
    async (request, reply) => {
      const name = known(request.params.name);
      // Lifts the operator's pause only: a block by a refused key is lifted from its run's page.
      const { running } = await unpauseWorkspace({ queue: runtime.queue(name), store: runtime.store, workspace: name });
      if (wantsJson(request)) return { workspace: name, paused: !running };
      return reply.redirect('/workspaces', 303);
    },
  );
}
