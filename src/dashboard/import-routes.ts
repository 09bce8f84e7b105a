import { once } from 'node:events';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'csv-stringify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { getWorkspace } from '../config/index.js';
import { OPERATION_TABLE, RECONCILE_OPERATIONS, type ReconcileOperation } from '../crm/index.js';
import { CrmSyncError } from '../errors/index.js';
import {
  COLUMN_TYPES,
  parseMapping,
  RowDecoder,
  suggestMapping,
  WRITE_POLICIES,
  type ColumnSuggestion,
  type Mapping,
} from '../ingest/index.js';
import type { PlanRecord, PlanStore } from '../plans/index.js';
import { checkMatchKey, checkRows, defaultMatchKey, writeOperation } from '../reconcile/index.js';
import { REFERENCE_FIELDS, referenceStoreOf } from '../references/index.js';
import { escapeCsvCell, type RunRecord } from '../runs/index.js';
import type { Runtime } from '../runtime/index.js';
import { FORM_TOKEN_MESSAGE, checkFormToken, formTokenFor, formTokenGuard, refuse } from './auth-hooks.js';
import { sendPage, wantsJson } from './http-answers.js';
import {
  IMPORTS_DIR,
  importDir,
  receiveImport,
  sampleColumns,
  sweepImportFiles,
  withoutPaths,
} from './import-files.js';
import {
  checkBody,
  historyBody,
  importBody,
  importPath,
  mappingBody,
  newImportBody,
  type MappingRule,
  planningBody,
  type HistoryLine,
} from './import-pages.js';
import { IMPORT_ID, type ImportStore, newImportId, type ImportRecord } from './import-store.js';
import { isStale, referenceLoader, sourceOptionsOf, startCheck, startPlan } from './import-tasks.js';
import { page } from './layout.js';
import { actorOf } from './plan-routes.js';
import type { SessionAuth } from './session-auth.js';
import { clientGone, type WorkLimiter } from './work-limiter.js';
import type { WorkspaceScope } from './workspace-scope.js';

export interface ImportRoutesOptions {
  runtime: Runtime;
  auth: SessionAuth;
  scope: WorkspaceScope;
  /** The workspaces an import may go to: those the dashboard serves. */
  workspaces: readonly string[];
  /** Largest file accepted (bytes); larger ones are pointed to the CLI. */
  maxImportBytes: number;
  /** Uploads at once (shared with the corrected-file uploads of retries). */
  uploads: WorkLimiter;
  /** Checks and plans being made at once. */
  tasks: WorkLimiter;
  /** Downloads at once (shared with the runs' CSV downloads). */
  downloads: WorkLimiter;
  imports: ImportStore;
  plans: PlanStore;
  /** How often expired imports' files are removed. Default a minute. */
  sweepMs?: number;
}

/** An import as answered to scripts: where the dashboard keeps the file is not theirs to know. */
function shown(record: ImportRecord | null): Omit<ImportRecord, 'filePath'> | null {
  if (record === null) return null;
  const { filePath: _path, ...rest } = record;
  return rest;
}

/** A mapping file uploaded to fill the table: small JSON. */
const MAX_MAPPING_BYTES = 1024 * 1024;

type ImportParams = { Params: { ws: string; id: string } };
type Body = Record<string, unknown>;

/** The import's rule for a column as its mapping says it (the table's type and write policy, a way the table does not offer). */
function ruleOf(mapping: Mapping | undefined, column: string): MappingRule {
  const target = mapping?.columns[column];
  if (target === null || target === undefined || typeof target === 'string') return {};
  const way = target.lookup !== undefined ? 'lookup file' : target.values !== undefined ? 'value map' : undefined;
  return {
    ...(target.type ? { type: target.type } : {}),
    ...(target.write ? { write: target.write } : {}),
    ...(way !== undefined ? { way } : {}),
  };
}

/** A suggestion as the mapping file says it: the field, or its rule, with `"by": "name"` when offered. */
function targetOf(s: ColumnSuggestion): Mapping['columns'][string] {
  if (s.field === null || s.by === undefined) return s.rule ?? s.field;
  return { ...(s.rule ?? { field: s.field }), by: s.by };
}

function parsedOrUndefined(raw: unknown): Mapping | undefined {
  if (raw === undefined) return undefined;
  try {
    return parseMapping(raw, 'the mapping');
  } catch {
    return undefined; // a remembered mapping of an older version: offer fresh suggestions instead
  }
}

/**
 * The import's own choices as a mapping, also when they were refused (two columns on one field):
 * the table shows them again beside the reason.
 */
function looseMapping(raw: unknown): Mapping | undefined {
  const parsed = parsedOrUndefined(raw);
  if (parsed !== undefined || raw === null || typeof raw !== 'object') return parsed;
  const columns = (raw as { columns?: unknown }).columns;
  if (columns === null || typeof columns !== 'object') return undefined;
  const ok = Object.values(columns).every(
    (t) =>
      t === null ||
      typeof t === 'string' ||
      (typeof t === 'object' && typeof (t as { field?: unknown }).field === 'string'),
  );
  // Checked entry by entry above: each is what a Mapping's columns hold.
  return ok ? ({ columns, unmapped: 'error' } as Mapping) : undefined;
}

/** Checks a mapping against the import's operation as the CLI would (MAPPING_INVALID with the reason). */
function checkMappingFor(op: ReconcileOperation, raw: unknown): Mapping {
  const mapping = parseMapping(raw, 'the mapping');
  new RowDecoder({ op: writeOperation(op), mapping });
  return mapping;
}

function text(body: Body, key: string): string {
  const v = body[key];
  return typeof v === 'string' ? v : '';
}

/** "How records are found", checked against the operation's resource: a match key it takes, or id. */
function matchKeyFor(op: ReconcileOperation, given: string): string {
  return given === '' ? defaultMatchKey(op) : checkMatchKey(OPERATION_TABLE[op].resource, given);
}

/**
 * The table's choices back as the mapping file the CLI takes: per column its field (null: skip),
 * with the type and write policy when not the defaults, and `"by": "name"` when a reference
 * field's column holds names (by_<i>; a field names do not resolve to ignores it). Settings the
 * table does not show (separator, trim, emptyCells, compare, a lookup file or value map) stay as
 * an uploaded mapping file had them; onUnknown goes with the last way it applied to.
 */
export function mappingFromForm(record: ImportRecord, body: Body): { columns: Record<string, unknown> } {
  const before = parsedOrUndefined(record.mapping);
  const columns: Record<string, unknown> = {};
  record.columns.forEach((column, i) => {
    const field = text(body, `field_${i}`);
    if (field === '') {
      columns[column] = null;
      return;
    }
    const type = text(body, `type_${i}`);
    const write = text(body, `write_${i}`);
    const old = before?.columns[column];
    const kept = old !== null && old !== undefined && typeof old !== 'string' && old.field === field ? old : {};
    const { type: _t, write: _w, field: _f, by: _b, onUnknown, ...rest } = kept as Record<string, unknown>;
    const otherWay = rest.lookup !== undefined || rest.values !== undefined;
    const byName = !otherWay && REFERENCE_FIELDS[field] !== undefined && text(body, `by_${i}`) === 'name';
    const rule: Record<string, unknown> = {
      field,
      ...rest,
      ...((COLUMN_TYPES as readonly string[]).includes(type) ? { type } : {}),
      ...((WRITE_POLICIES as readonly string[]).includes(write) && write !== 'always' ? { write } : {}),
      ...(byName ? { by: 'name' } : {}),
      ...(onUnknown !== undefined && (byName || otherWay) ? { onUnknown } : {}),
    };
    columns[column] = Object.keys(rule).length === 1 ? field : rule;
  });
  return { columns };
}

/**
 * The browser import (issue 45): upload → map columns → check every row → the plan (the plan
 * pages' Approve and Apply) → the run page (Undo). Every step is a form post with the page's form
 * token, every route scoped like the rest (another workspace's import is "not found"); the file
 * stays on the dashboard's disk, served by no route, until its plan expires.
 */
export function registerImportRoutes(app: FastifyInstance, o: ImportRoutesOptions): void {
  const { runtime, auth, scope, imports, plans } = o;
  const root = join(runtime.config.resultsDir, IMPORTS_DIR);
  const deps = { runtime, imports, plans };
  const maxMb = Math.round(o.maxImportBytes / 1048576);
  const tooLarge = `the file is larger than ${maxMb} MB, the most the dashboard takes: import it with the CLI (crm-sync plan <file> --mapping <mapping.json>, then crm-sync apply), which reads files of any size`;
  const served = o.workspaces.filter((w) => scope.allows(w));

  const sweep = () =>
    sweepImportFiles(root, imports, plans).catch((err: unknown) =>
      runtime.logger.warn({ err }, 'dashboard: removing expired import files failed'),
    );
  const timer = setInterval(() => void sweep(), o.sweepMs ?? 60_000);
  timer.unref();
  app.addHook('onClose', async () => clearInterval(timer));
  void sweep();

  const importOf = async (ws: string, id: string): Promise<ImportRecord> => {
    const missing = () => new CrmSyncError('RUN_NOT_FOUND', `no import ${id.slice(0, 80)}`);
    if (!IMPORT_ID.test(id) || !scope.allows(ws) || !served.includes(ws)) throw missing();
    const record = await imports.get(ws, id);
    if (record === null) throw missing();
    return record;
  };
  // A post that is not multipart holds no file: without the form token it is refused as any
  // form post is (403), with it it is told how to send the file.
  const notMultipart = (request: FastifyRequest, reply: FastifyReply, what: string) => {
    const body = (request.body ?? {}) as Body;
    if (!checkFormToken(auth, request, body._csrf)) return refuse(reply, 403, FORM_TOKEN_MESSAGE);
    throw new CrmSyncError('USAGE', `send ${what} as multipart/form-data (field "file"), from the form`);
  };
  const needsFile = (record: ImportRecord) => {
    if (record.fileRemoved || record.discarded !== undefined)
      throw new CrmSyncError(
        'PLAN_REFUSED',
        `the file of import ${record.id} was removed (its plan expired or it was discarded): upload it again`,
      );
  };
  const show = (
    request: FastifyRequest,
    reply: FastifyReply,
    title: string,
    body: ReturnType<typeof newImportBody>,
    refreshSeconds?: number,
  ) =>
    sendPage(
      reply,
      page({
        title,
        body,
        nav: 'imports',
        canSignOut: !auth.insecure,
        csrf: formTokenFor(auth, request),
        ...(refreshSeconds !== undefined ? { refreshSeconds } : {}),
      }),
    );
  const lineOf = async (record: ImportRecord): Promise<HistoryLine> => {
    const planId = record.plan?.planId;
    const plan: PlanRecord | null = planId !== undefined ? await plans.get(planId) : null;
    const run: RunRecord | null = plan?.runId !== undefined ? await runtime.store.getRun(plan.runId) : null;
    return { record, plan, run };
  };

  app.get('/imports', async (request, reply) => {
    const all = (await Promise.all(served.map((w) => imports.list(w)))).flat();
    all.sort((a, b) => b.createdMs - a.createdMs);
    const lines = await Promise.all(all.map(lineOf));
    if (wantsJson(request)) return { imports: lines.map((l) => ({ ...l, record: shown(l.record) })) };
    return show(request, reply, 'Imports', historyBody(lines));
  });

  app.get('/imports/new', async (request, reply) =>
    show(request, reply, 'New import', newImportBody({ workspaces: served, csrf: formTokenFor(auth, request), maxMb })),
  );

  app.post('/imports', async (request, reply) => {
    if (!request.isMultipart()) return notMultipart(request, reply, 'the file');
    const id = newImportId();
    // Received beside the imports until its workspace is known; a refused upload's is removed at once.
    const incoming = importDir(root, '.incoming', id);
    type Answer = { kind: 'bad-form-token' } | { kind: 'done'; record: ImportRecord };
    const answer = await o.uploads.run(request.signal, async (): Promise<Answer> => {
      try {
        const got = await receiveImport(request, incoming, o.maxImportBytes, tooLarge);
        if (!checkFormToken(auth, request, got.fields._csrf)) return { kind: 'bad-form-token' };
        const workspace = got.fields.workspace ?? '';
        if (!served.includes(workspace))
          throw new CrmSyncError('USAGE', `choose a workspace this dashboard serves: ${served.join(', ')}`);
        const op = got.fields.op as ReconcileOperation;
        if (!(RECONCILE_OPERATIONS as readonly string[]).includes(op))
          throw new CrmSyncError('USAGE', `choose an operation: ${RECONCILE_OPERATIONS.join(', ')}`);
        const matchKey = matchKeyFor(op, got.fields.match ?? '');
        if (got.fileName === undefined) throw new CrmSyncError('USAGE', 'choose the file to import first');
        const dir = importDir(root, workspace, id);
        await mkdir(join(root, workspace), { recursive: true });
        await rename(incoming, dir);
        const filePath = join(dir, got.fileName);
        let sampled;
        try {
          sampled = await sampleColumns(filePath);
        } catch (err) {
          await rm(dir, { recursive: true, force: true });
          if (err instanceof CrmSyncError)
            throw new CrmSyncError(err.code, withoutPaths(err.message, filePath, got.fileName), { cause: err });
          throw err;
        }
        const now = Date.now();
        const record: ImportRecord = {
          id,
          workspace,
          by: actorOf(request),
          createdAt: new Date(now).toISOString(),
          createdMs: now,
          expiresMs: now + getWorkspace(runtime.config, workspace).planTtlMs,
          fileName: got.fileName,
          filePath,
          bytes: got.bytes,
          fileRemoved: false,
          op,
          matchKey,
          columns: sampled.columns,
          samples: sampled.samples,
        };
        await imports.save(record, true);
        return { kind: 'done', record };
      } finally {
        await rm(incoming, { recursive: true, force: true });
      }
    });
    if (answer.kind === 'bad-form-token') return refuse(reply, 403, FORM_TOKEN_MESSAGE);
    if (wantsJson(request)) return { import: shown(answer.record) };
    return reply.redirect(importPath(answer.record, '/mapping'), 303);
  });

  app.get('/imports/:ws/:id', async (request: FastifyRequest<ImportParams>, reply) => {
    const record = await importOf(request.params.ws, request.params.id);
    const line = await lineOf(record);
    if (wantsJson(request)) return { ...line, record: shown(line.record) };
    return show(request, reply, `Import ${record.fileName}`, importBody(line, formTokenFor(auth, request)));
  });

  /**
   * The table's suggestions. Whether a reference column holds ids or names is told as the resolver
   * tells it, by the workspace's stored references (Redis; the CRM is not read for a suggestion).
   */
  const suggestionsOf = async (record: ImportRecord, remembered: Mapping | undefined): Promise<ColumnSuggestion[]> => {
    const op = writeOperation(record.op);
    const options = { remembered, samples: record.samples };
    const plain = suggestMapping(op, record.columns, options);
    if (!plain.some((s) => s.field !== null && REFERENCE_FIELDS[s.field] !== undefined && s.from !== 'remembered'))
      return plain;
    const references = await referenceStoreOf(runtime.config, record.workspace, runtime.redis).index();
    return suggestMapping(op, record.columns, { ...options, references });
  };

  /** The table: the import's own mapping once chosen, else the remembered one and the suggestions. */
  const mappingPage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    record: ImportRecord,
    extra: { error?: string; notice?: string; status?: number } = {},
  ) => {
    const own = looseMapping(record.mapping);
    const remembered = own ?? parsedOrUndefined(await imports.rememberedMapping(record.workspace, record.columns));
    const suggestions = await suggestionsOf(record, remembered);
    const rules = Object.fromEntries(record.columns.map((c) => [c, ruleOf(remembered, c)]));
    const body = mappingBody({
      record,
      suggestions,
      rules,
      csrf: formTokenFor(auth, request),
      ...(extra.error !== undefined ? { error: extra.error } : {}),
      ...(extra.notice !== undefined ? { notice: extra.notice } : {}),
      ownMapping: own !== undefined,
    });
    if (extra.status !== undefined) reply.code(extra.status);
    return sendPage(
      reply,
      page({
        title: `Map columns · ${record.fileName}`,
        body,
        nav: 'imports',
        canSignOut: !auth.insecure,
        csrf: formTokenFor(auth, request),
      }),
      extra.status ?? 200,
    );
  };

  app.get(
    '/imports/:ws/:id/mapping',
    async (request: FastifyRequest<ImportParams & { Querystring: { done?: string } }>, reply) => {
      const record = await importOf(request.params.ws, request.params.id);
      needsFile(record);
      const notice =
        request.query.done === 'mapping-file'
          ? 'The mapping file filled the table: check it, then check every row.'
          : undefined;
      return mappingPage(request, reply, record, notice !== undefined ? { notice } : {});
    },
  );

  app.get('/imports/:ws/:id/mapping.json', async (request: FastifyRequest<ImportParams>, reply) => {
    const record = await importOf(request.params.ws, request.params.id);
    let raw = record.mapping;
    if (raw === undefined) {
      // Not chosen yet: the suggestions, as the table offers them.
      const remembered = parsedOrUndefined(await imports.rememberedMapping(record.workspace, record.columns));
      const columns = Object.fromEntries((await suggestionsOf(record, remembered)).map((s) => [s.column, targetOf(s)]));
      raw = { columns };
    }
    const name = record.fileName.replace(/\.[^.]+$/, '');
    return reply
      .type('application/json; charset=utf-8')
      .header('Content-Disposition', `attachment; filename="${name.replace(/[^\w.\- ]/g, '_')}.mapping.json"`)
      .send(`${JSON.stringify(raw, null, 2)}\n`);
  });

  app.post<ImportParams & { Body: Body }>(
    '/imports/:ws/:id/mapping',
    { preHandler: formTokenGuard(auth) },
    async (request, reply) => {
      const record = await importOf(request.params.ws, request.params.id);
      needsFile(record);
      const body = request.body ?? {};
      const raw = mappingFromForm(record, body);
      let matchKey: string;
      try {
        matchKey = matchKeyFor(record.op, text(body, 'match'));
        checkMappingFor(record.op, raw);
      } catch (err) {
        if (!(err instanceof CrmSyncError)) throw err;
        // The table again with what was chosen, and why it cannot be used.
        return mappingPage(request, reply, { ...record, mapping: raw }, { error: err.message, status: 422 });
      }
      const release = await o.tasks.acquire(request.signal);
      try {
        const updated = await imports.update(record.workspace, record.id, (r) => {
          r.mapping = raw;
          r.matchKey = matchKey;
          return true;
        });
        await imports.rememberMapping(record.workspace, record.columns, raw);
        await startCheck(deps, updated ?? record, release);
      } catch (err) {
        release();
        throw err;
      }
      if (wantsJson(request)) return { import: shown(await imports.get(record.workspace, record.id)) };
      return reply.redirect(importPath(record, '/check'), 303);
    },
  );

  app.post('/imports/:ws/:id/mapping/file', async (request: FastifyRequest<ImportParams>, reply) => {
    if (!request.isMultipart()) return notMultipart(request, reply, 'the mapping file');
    const record = await importOf(request.params.ws, request.params.id);
    needsFile(record);
    let csrf: unknown;
    let content: Buffer | undefined;
    for await (const part of request.parts({ limits: { fileSize: MAX_MAPPING_BYTES, files: 1, fields: 5 } })) {
      if (part.type === 'field') {
        if (part.fieldname === '_csrf') csrf = part.value;
      } else if (part.fieldname === 'file' && content === undefined) {
        content = await part.toBuffer();
      } else part.file.resume();
    }
    if (!checkFormToken(auth, request, csrf)) return refuse(reply, 403, FORM_TOKEN_MESSAGE);
    if (content === undefined || content.length === 0) throw new CrmSyncError('USAGE', 'choose the mapping file first');
    let raw: unknown;
    try {
      raw = JSON.parse(content.toString('utf8'));
      checkMappingFor(record.op, raw);
    } catch (err) {
      const message =
        err instanceof CrmSyncError ? err.message : `the mapping file is not valid JSON (${(err as Error).message})`;
      return mappingPage(request, reply, record, { error: message, status: 422 });
    }
    await imports.update(record.workspace, record.id, (r) => {
      r.mapping = raw;
      return true;
    });
    if (wantsJson(request)) return { import: shown(await imports.get(record.workspace, record.id)) };
    return reply.redirect(importPath(record, '/mapping?done=mapping-file'), 303);
  });

  app.get('/imports/:ws/:id/check', async (request: FastifyRequest<ImportParams>, reply) => {
    const record = await importOf(request.params.ws, request.params.id);
    if (wantsJson(request)) return { check: record.check ?? null };
    const running = record.check?.state === 'running' && !isStale(record.check);
    return show(
      request,
      reply,
      `Check · ${record.fileName}`,
      checkBody(record, formTokenFor(auth, request)),
      running ? 1 : undefined,
    );
  });

  // Every invalid row as read, with its line and reasons, as CSV: cells a spreadsheet would run as
  // formulas are escaped as the runs' exports escape them (escapeCsvCell).
  app.get('/imports/:ws/:id/invalid.csv', async (request: FastifyRequest<ImportParams>, reply) => {
    const record = await importOf(request.params.ws, request.params.id);
    needsFile(record);
    if (record.mapping === undefined) throw new CrmSyncError('USAGE', 'choose the mapping and check the rows first');
    const release = await o.downloads.acquire(request.signal);
    const out = stringify();
    out.once('close', release);
    request.signal.addEventListener('abort', () => out.destroy(clientGone()), { once: true });
    const columns = record.columns;
    out.write([...columns, 'crm_sync_line', 'crm_sync_error'].map(escapeCsvCell));
    checkRows({
      ...sourceOptionsOf(record),
      loadReferences: referenceLoader(deps, record),
      onInvalid: async (row) => {
        const cells = [
          ...columns.map((c) => row.original[c] ?? ''),
          String(row.line),
          row.errors.map((e) => `${e.field}: ${e.message}`).join('; '),
        ].map(escapeCsvCell);
        if (!out.write(cells)) await once(out, 'drain');
      },
    }).then(
      () => out.end(),
      (err: unknown) => out.destroy(err instanceof Error ? err : new Error(String(err))),
    );
    const name = record.fileName.replace(/\.[^.]+$/, '').replace(/[^\w.\- ]/g, '_');
    return reply
      .type('text/csv; charset=utf-8')
      .header('Content-Disposition', `attachment; filename="${name}.invalid.csv"`)
      .send(out);
  });

  app.post<ImportParams>('/imports/:ws/:id/plan', { preHandler: formTokenGuard(auth) }, async (request, reply) => {
    const record = await importOf(request.params.ws, request.params.id);
    needsFile(record);
    if (record.check?.state !== 'done')
      throw new CrmSyncError('PLAN_REFUSED', 'check every row first (the check must have finished)');
    if (record.plan?.state === 'running' && !isStale(record.plan))
      return reply.redirect(importPath(record, '/planning'), 303);
    const release = await o.tasks.acquire(request.signal);
    try {
      await startPlan(deps, record, release);
    } catch (err) {
      release();
      throw err;
    }
    if (wantsJson(request)) return { import: shown(await imports.get(record.workspace, record.id)) };
    return reply.redirect(importPath(record, '/planning'), 303);
  });

  app.get('/imports/:ws/:id/planning', async (request: FastifyRequest<ImportParams>, reply) => {
    const record = await importOf(request.params.ws, request.params.id);
    if (wantsJson(request)) return { plan: record.plan ?? null };
    if (record.plan?.state === 'done' && record.plan.planId !== undefined)
      return reply.redirect(`/plans/${encodeURIComponent(record.plan.planId)}`, 303);
    const running = record.plan?.state === 'running' && !isStale(record.plan);
    return show(request, reply, `Planning · ${record.fileName}`, planningBody(record), running ? 1 : undefined);
  });

  app.post<ImportParams>('/imports/:ws/:id/discard', { preHandler: formTokenGuard(auth) }, async (request, reply) => {
    const record = await importOf(request.params.ws, request.params.id);
    const who = actorOf(request);
    const planId = record.plan?.planId;
    if (planId !== undefined) {
      const plan = await plans.get(planId);
      if (plan !== null && (plan.status === 'pending' || plan.status === 'approved') && !plan.expired) {
        const move = await plans.discard(planId, who);
        if (!move.ok) throw new CrmSyncError('PLAN_REFUSED', `the import's plan cannot be discarded (${move.why})`);
      } else if (plan !== null && (plan.status === 'applying' || plan.status === 'applied'))
        throw new CrmSyncError(
          'PLAN_REFUSED',
          `the import's plan was applied: take the run back with Undo on its page`,
        );
    }
    await rm(importDir(root, record.workspace, record.id), { recursive: true, force: true });
    await imports.update(record.workspace, record.id, (r) => {
      r.discarded = { at: new Date().toISOString(), by: who };
      r.fileRemoved = true;
      return true;
    });
    if (wantsJson(request)) return { import: shown(await imports.get(record.workspace, record.id)) };
    return reply.redirect(importPath(record), 303);
  });
}
