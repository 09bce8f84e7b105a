import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CrmSyncError } from '../errors/index.js';
import { resumeWorkspace, retryRun } from '../queue/index.js';
import { writeResultsCsv } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { FORM_TOKEN_MESSAGE, checkFormToken, formTokenFor, formTokenGuard, refuse } from './auth-hooks.js';
import { html, type SafeHtml } from './html.js';
import { intParam, sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import { runPageBody, uploadResultBody } from './run-page.js';
import type { SessionAuth } from './session-auth.js';

export interface RunRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  /** Largest corrected CSV accepted, in bytes. */
  maxUploadBytes: number;
  /** Failed rows per page. */
  pageSize: number;
}

type RunRequest<Q = unknown, B = unknown> = FastifyRequest<{ Params: { id: string }; Querystring: Q; Body: B }>;

const REFRESH_SECONDS = 3;

/** Row numbers from a form (`row=3&row=7`, or `3,7` from a script). */
export function parseRows(value: unknown): number[] {
  const parts = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : [];
  const rows = new Set<number>();
  for (const p of parts) {
    const n = Number(typeof p === 'string' ? p.trim() : p);
    if (!Number.isInteger(n) || n < 1) throw new CrmSyncError('USAGE', `"${String(p)}" is not a row number`);
    rows.add(n);
  }
  return [...rows].sort((a, b) => a - b);
}

function noticeFor(q: Record<string, string | undefined>): SafeHtml | undefined {
  const n = intParam(q.n, 0, 0);
  const rows = `${n.toLocaleString('en-US')} row${n === 1 ? '' : 's'}`;
  switch (q.done) {
    case 'retry':
      return html`<div class="notice ok">${rows} sent again. The page refreshes while they run.</div>`;
    case 'resume':
      return html`<div class="notice ok">Workspace resumed; ${n} blocked run${n === 1 ? '' : 's'} continue.</div>`;
    default:
      return undefined;
  }
}

export function registerRunRoutes(app: FastifyInstance, options: RunRoutesOptions): void {
  const { runtime, auth, pageSize } = options;
  const { store } = runtime;

  app.get('/runs/:id', async (request: RunRequest<Record<string, string | undefined>>, reply) => {
    const run = await store.requireRun(request.params.id);
    const q = (request.query.q ?? '').trim().slice(0, 200);
    const wanted = intParam(request.query.page, 1);
    const problems = await store.problems(run.id, { offset: (wanted - 1) * pageSize, limit: pageSize, ...(q ? { messageContains: q } : {}) });
    if (wantsJson(request)) return { run, problems };
    const notice = noticeFor(request.query);
    const body = runPageBody({ run, problems, page: wanted, pageSize, q, csrf: formTokenFor(auth, request), ...(notice ? { notice } : {}) });
    return sendPage(
      reply,
      page({ title: `Run ${run.id}`, body, nav: 'runs', canSignOut: !auth.insecure, csrf: formTokenFor(auth, request), ...(run.status === 'running' ? { refreshSeconds: REFRESH_SECONDS } : {}) }),
    );
  });

  app.get('/runs/:id/results.csv', async (request: RunRequest<{ failed?: string }>, reply) => {
    const run = await store.requireRun(request.params.id);
    const problemsOnly = request.query.failed === '1' || request.query.failed === 'true';
    const out = new PassThrough();
    // Streamed: a 100,000-row run is never held in memory; an error mid-way cuts the download.
    writeResultsCsv(store, run.id, out, { problemsOnly }).then(
      () => out.end(),
      (err: unknown) => out.destroy(err instanceof Error ? err : new Error(String(err))),
    );
    return reply
      .type('text/csv; charset=utf-8')
      .header('Content-Disposition', `attachment; filename="${run.id}-${problemsOnly ? 'failed' : 'results'}.csv"`)
      .header('Cache-Control', 'no-store')
      .send(out);
  });

  app.post<{ Params: { id: string }; Body: { row?: unknown; rows?: unknown } | undefined }>('/runs/:id/retry', { preHandler: formTokenGuard(auth) }, async (request, reply) => {
    const run = await store.requireRun(request.params.id);
    const body = request.body ?? {};
    const selected = body.row ?? body.rows;
    const rows = selected !== undefined ? parseRows(selected) : undefined;
    if (rows !== undefined && rows.length === 0) throw new CrmSyncError('USAGE', 'no rows selected: tick the rows to retry first');
    const summary = await retryRun({ runId: run.id, queue: runtime.queue(run.workspace), store, logger: runtime.logger, ...(rows ? { rows } : {}) });
    if (wantsJson(request)) return { run: summary.run, progress: summary.progress };
    return reply.redirect(`/runs/${encodeURIComponent(run.id)}?done=retry&n=${summary.progress.read}`, 303);
  });

  app.post<{ Params: { id: string } }>('/runs/:id/resume', { preHandler: formTokenGuard(auth) }, async (request, reply) => {
    const run = await store.requireRun(request.params.id);
    const resumed = await resumeWorkspace({ queue: runtime.queue(run.workspace), store, workspace: run.workspace });
    if (wantsJson(request)) return { resumed };
    return reply.redirect(`/runs/${encodeURIComponent(run.id)}?done=resume&n=${resumed.length}`, 303);
  });

  app.post('/runs/:id/upload', async (request: RunRequest, reply: FastifyReply) => {
    const run = await store.requireRun(request.params.id);
    if (!request.isMultipart()) throw new CrmSyncError('USAGE', 'send the corrected CSV as multipart/form-data (field "file")');
    const dir = await mkdtemp(join(tmpdir(), 'crm-sync-upload-'));
    try {
      const file = join(dir, 'corrected.csv');
      let csrf: unknown;
      let gotFile = false;
      for await (const part of request.parts({ limits: { fileSize: options.maxUploadBytes, files: 1 } })) {
        if (part.type === 'field') {
          if (part.fieldname === '_csrf') csrf = part.value;
        } else if (part.fieldname === 'file' && !gotFile) {
          gotFile = true;
          await pipeline(part.file, createWriteStream(file));
          if (part.file.truncated) {
            throw new CrmSyncError('INPUT_TOO_LARGE', `the file is larger than ${Math.round(options.maxUploadBytes / 1048576)} MB`);
          }
        } else {
          part.file.resume();
        }
      }
      // Checked after the parts are read: the browser may send the token after the file.
      if (!checkFormToken(auth, request, csrf)) return refuse(reply, 403, FORM_TOKEN_MESSAGE);
      if (!gotFile) throw new CrmSyncError('USAGE', 'choose the corrected CSV file first');
      const summary = await retryRun({ runId: run.id, queue: runtime.queue(run.workspace), store, file, logger: runtime.logger });
      if (wantsJson(request)) return { run: summary.run, progress: summary.progress, ignored: summary.ignored };
      const body = uploadResultBody(summary.run, summary.progress.read, summary.ignored);
      return sendPage(reply, page({ title: 'Corrected file', body, nav: 'runs', canSignOut: !auth.insecure, csrf: formTokenFor(auth, request) }));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}
