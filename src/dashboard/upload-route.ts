import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CrmSyncError, isCrmSyncError } from '../errors/index.js';
import { retryRows, type IgnoredLine, type RetrySummary } from '../lifecycle/index.js';
import type { Runtime } from '../runtime/index.js';
import { FORM_TOKEN_MESSAGE, checkFormToken, formTokenFor, refuse } from './auth-hooks.js';
import { sendPage, wantsJson } from './http-answers.js';
import { page } from './layout.js';
import { receiveForm } from './multipart-form.js';
import { uploadResultBody } from './run-page.js';
import { loadUploadAnswer, saveUploadAnswer } from './upload-answers.js';
import type { SessionAuth } from './session-auth.js';
import type { WorkLimiter } from './work-limiter.js';
import type { WorkspaceScope } from './workspace-scope.js';

export interface UploadRouteOptions {
  runtime: Runtime;
  auth: SessionAuth;
  scope: WorkspaceScope;
  /** Largest corrected CSV accepted, in bytes. */
  maxUploadBytes: number;
  limiter: WorkLimiter;
}

/** Ignored lines listed in the answer; the rest are only counted. */
export const IGNORED_SHOWN = 200;
const UPLOADED = 'the uploaded file';
const MALFORMED =
  'the upload is not a well-formed multipart/form-data body: send the corrected CSV from the run page (field "file")';

/** Messages about the upload name it, never the server's temporary path. */
function withoutPath(text: string, file: string, dir: string): string {
  return text.split(file).join(UPLOADED).split(dir).join(UPLOADED);
}

/**
 * Refuses what cannot be a corrected export before the run is touched (a retry marks the run as
 * producing again, and a file that fails half-way would leave it so): a binary or non-UTF-8
 * file (checked to the end, a chunk at a time), or one without the export's crm_sync_row column.
 */
async function checkLooksLikeExport(file: string): Promise<void> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const notText = () =>
    new CrmSyncError('INPUT_ENCODING', `${UPLOADED} is not a UTF-8 CSV file (save it as CSV UTF-8)`);
  let header: string | undefined;
  let head = '';
  let offset = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 256 * 1024 }) as AsyncIterable<Buffer>) {
    const nul = chunk.indexOf(0);
    if (nul !== -1) throw nulByte(offset === 0 ? chunk : null, offset + nul);
    offset += chunk.length;
    let text: string;
    try {
      text = decoder.decode(chunk, { stream: true });
    } catch {
      throw notText();
    }
    if (header === undefined) {
      head += text.slice(0, 64 * 1024);
      const end = head.indexOf('\n');
      if (end !== -1 || head.length >= 64 * 1024) header = end === -1 ? head : head.slice(0, end);
    }
  }
  try {
    decoder.decode();
  } catch {
    throw notText();
  }
  if (!(header ?? head).includes('crm_sync_row')) {
    throw new CrmSyncError(
      'USAGE',
      `${UPLOADED} has no crm_sync_row column: upload the failed-rows CSV downloaded from the run page (keep the crm_sync_ columns)`,
    );
  }
}

/**
 * A NUL byte is valid UTF-8, so "not UTF-8" would be wrong: a CSV holds none. Said by what it
 * most likely is: UTF-16 text (what "Unicode text" exports write, a NUL in every other byte) or
 * a binary file. `first` is the file's first chunk when the NUL is in it.
 */
function nulByte(first: Buffer | null, at: number): CrmSyncError {
  const bom = first !== null && ((first[0] === 0xff && first[1] === 0xfe) || (first[0] === 0xfe && first[1] === 0xff));
  if (bom) return new CrmSyncError('INPUT_ENCODING', `${UPLOADED} is UTF-16 text, not UTF-8: save it as CSV UTF-8`);
  return new CrmSyncError(
    'INPUT_ENCODING',
    `${UPLOADED} holds a NUL byte (byte ${at + 1}), which no CSV text has: is it a binary file? Upload the CSV downloaded from the run page`,
  );
}

/** Reads the multipart body: the form token, and the file (saved to `file`). */
async function receive(
  request: FastifyRequest,
  file: string,
  maxBytes: number,
): Promise<{ csrf: unknown; gotFile: boolean; resendSuperseded: boolean }> {
  const form = await receiveForm(request, {
    maxBytes,
    saveTo: () => file,
    words: {
      tooLarge: `the file is larger than ${Math.round(maxBytes / 1048576)} MB`,
      tooManyFiles: 'the upload holds more than one file: send one corrected CSV (field "file")',
      tooManyFields:
        'the upload holds more form fields than the run page sends: upload from the run page (the corrected CSV in field "file")',
      malformed: MALFORMED,
    },
  });
  // The form's checkbox: rows a later run wrote are sent as new writes over its values.
  const resend = form.fields.resendSuperseded;
  return {
    csrf: form.fields._csrf,
    gotFile: form.file !== undefined,
    resendSuperseded: resend === 'on' || resend === '1',
  };
}

/** What an upload's slot produced; the answer is sent from it once the slot is free. */
type UploadAnswer = { kind: 'bad-form-token' } | { kind: 'done'; summary: RetrySummary; ignored: IgnoredLine[] };

export function registerUploadRoute(app: FastifyInstance, options: UploadRouteOptions): void {
  const { runtime, auth, scope, limiter } = options;
  const { store } = runtime;

  app.post('/runs/:id/upload', async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const run = await scope.run(store, request.params.id);
    if (!request.isMultipart())
      throw new CrmSyncError('USAGE', 'send the corrected CSV as multipart/form-data (field "file")');
    // One upload in a slot: its file on disk and its retry are bounded, whatever the file holds.
    // The answer is sent only after the slot is free (and the temporary file gone), so a client
    // that has its answer can upload again at once.
    const answer = await limiter.run(request.signal, async (): Promise<UploadAnswer> => {
      const dir = await mkdtemp(join(tmpdir(), 'crm-sync-upload-'));
      const file = join(dir, 'corrected.csv');
      try {
        const { csrf, gotFile, resendSuperseded } = await receive(request, file, options.maxUploadBytes);
        // Checked after the parts are read: the browser may send the token after the file.
        if (!checkFormToken(auth, request, csrf)) return { kind: 'bad-form-token' };
        if (!gotFile) throw new CrmSyncError('USAGE', 'choose the corrected CSV file first');
        await checkLooksLikeExport(file);
        // An edited file in a workspace that requires approval is refused (APPROVAL_REQUIRED, 409).
        const summary = await retryRows({
          runId: run.id,
          config: runtime.config,
          queueFor: (workspace) => runtime.queue(workspace),
          store,
          file,
          logger: runtime.logger,
          ignoredSampleSize: IGNORED_SHOWN,
          resendSuperseded,
        });
        const ignored = summary.ignored.map((i) => ({ ...i, reason: withoutPath(i.reason, file, dir) }));
        return { kind: 'done', summary, ignored };
      } catch (err) {
        if (isCrmSyncError(err)) throw new CrmSyncError(err.code, withoutPath(err.message, file, dir), { cause: err });
        throw err;
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
    if (answer.kind === 'bad-form-token') return refuse(reply, 403, FORM_TOKEN_MESSAGE);
    const { summary, ignored } = answer;
    if (wantsJson(request))
      return {
        run: summary.run,
        progress: summary.progress,
        ignored,
        ignoredCount: summary.ignoredCount,
        writtenLater: summary.writtenLater,
      };
    const token = await saveUploadAnswer(runtime.redis, runtime.config.prefix, {
      runId: run.id,
      retried: summary.progress.read,
      ignored,
      ignoredCount: summary.ignoredCount,
      writtenLater: summary.writtenLater,
    });
    return reply.redirect(`/runs/${encodeURIComponent(run.id)}/uploads/${token}`, 303);
  });

  app.get(
    '/runs/:id/uploads/:token',
    async (request: FastifyRequest<{ Params: { id: string; token: string } }>, reply: FastifyReply) => {
      const run = await scope.run(store, request.params.id);
      const answer = await loadUploadAnswer(runtime.redis, runtime.config.prefix, request.params.token);
      if (answer === null || answer.runId !== run.id) {
        throw new CrmSyncError(
          'RUN_NOT_FOUND',
          'this upload answer is gone (they are kept 15 minutes): open the run to see where its rows are',
        );
      }
      if (wantsJson(request)) return answer;
      const body = uploadResultBody(run, answer.retried, answer.ignored, answer.ignoredCount, answer.writtenLater);
      return sendPage(
        reply,
        page({
          title: 'Corrected file',
          body,
          nav: 'runs',
          canSignOut: !auth.insecure,
          csrf: formTokenFor(auth, request),
        }),
      );
    },
  );
}
