import type { FastifyInstance, FastifyRequest } from 'fastify';
import { getWorkspace } from '../config/index.js';
import { CrmSyncError } from '../errors/index.js';
import { historyReport } from '../history/index.js';
import { PlanStore } from '../plans/index.js';
import { workspaceRequestBudget } from '../rate/index.js';
import { createCrmClient, type Runtime } from '../runtime/index.js';
import { planUndo } from '../undo/index.js';
import { formTokenFor, formTokenGuard } from './auth-hooks.js';
import { html } from './html.js';
import { sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import type { SessionAuth } from './session-auth.js';
import type { WorkspaceScope } from './workspace-scope.js';

export interface UndoRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  scope: WorkspaceScope;
}

const RECORD_ID = /^[^\s/?#\\]{1,200}$/;

/**
 * Taking a run back from the dashboard (issue 34): the run page's Undo button plans the undo
 * (planUndo, as `runs undo --plan`: one list read, nothing sent) and opens the plan's page, where
 * it is reviewed and approved like any plan, then applied (`crm-sync apply`); and a record's page
 * (`/records/<workspace>/<id>`): every change crm-sync made to it, newest first.
 */
export function registerUndoRoutes(app: FastifyInstance, o: UndoRoutesOptions): void {
  const { runtime, scope } = o;
  const { config } = runtime;
  const plans = new PlanStore({ redis: runtime.redis, prefix: config.prefix });

  app.post<{ Params: { id: string } }>(
    '/runs/:id/undo',
    { preHandler: formTokenGuard(o.auth) },
    async (request, reply) => {
      const run = await scope.run(runtime.store, request.params.id);
      const ws = getWorkspace(config, run.workspace);
      const client = createCrmClient(config, run.workspace, runtime.logger);
      try {
        const undo = await planUndo({
          plans,
          results: runtime.store,
          runs: runtime.store,
          run,
          client,
          budget: workspaceRequestBudget(runtime.redis, config, run.workspace, client),
          settings: { planTtlMs: ws.planTtlMs, driftMaxAgeMs: ws.driftMaxAgeMs, rateLimit: ws.rateLimit },
          logger: runtime.logger,
        });
        if (wantsJson(request))
          return { planId: undo.plan.id, counts: undo.plan.counts, left: undo.left, created: undo.created };
        return reply.redirect(`/plans/${encodeURIComponent(undo.plan.id)}?done=undo`, 303);
      } finally {
        client.close();
      }
    },
  );

  app.get(
    '/records/:workspace/:id',
    async (request: FastifyRequest<{ Params: { workspace: string; id: string } }>, reply) => {
      const { workspace, id } = request.params;
      if (!scope.allows(workspace) || config.workspaces[workspace] === undefined || !RECORD_ID.test(id))
        throw new CrmSyncError('USAGE', `no record ${id.slice(0, 80)} in a workspace you can see`);
      const { entries, notes } = await historyReport({
        history: config.history,
        store: runtime.store,
        resultsDir: config.resultsDir,
        workspace,
        recordId: id,
      });
      if (wantsJson(request)) return { workspace, recordId: id, entries, notes };
      const csrf = formTokenFor(o.auth, request);
      const rows = entries.map(
        (e) =>
          html`<tr><td>${e.at}</td><td><a class="mono" href="/runs/${encodeURIComponent(e.runId)}">${e.runId}</a>${e.undoOf !== undefined ? html` <span class="badge">undo of ${e.undoOf}</span>` : ''}</td><td>${String(e.row)}${e.line !== undefined ? ` (line ${e.line})` : ''}</td><td>${e.field}</td><td>${e.beforeNamed ?? e.before ?? '(not known)'}</td><td>${e.afterNamed ?? e.after}</td></tr>`,
      );
      const body = html`<p><a href="/">← All runs</a></p>
<h1 class="record-title">Record <span class="mono">${id}</span></h1>
<p class="sub">Workspace <b>${workspace}</b> · every change crm-sync made to it, newest first${config.history ? ' (from the history database)' : ''}</p>
${notes.map((n) => html`<p class="muted">${n}</p>`)}
${
  entries.length === 0
    ? html`<p class="muted">No change by crm-sync to this record.</p>`
    : html`<div class="scroll"><table class="history"><thead><tr><th>Time</th><th>Run</th><th>Row</th><th>Field</th><th>Before</th><th>After</th></tr></thead><tbody>${rows}</tbody></table></div>`
}`;
      return sendPage(reply, page({ title: `Record ${id}`, body, nav: 'runs', canSignOut: !o.auth.insecure, csrf }));
    },
  );
}
