import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { FastifyRequest } from 'fastify';
import { CrmSyncError, isCrmSyncError } from '../errors/index.js';

/** What a refused form says to the person who sent it, in the words of the page it came from. */
export interface FormWords {
  /** The file is over `maxBytes` (INPUT_TOO_LARGE). */
  tooLarge: string;
  /** More than one file (USAGE). */
  tooManyFiles: string;
  /** More fields than the page sends (USAGE). */
  tooManyFields: string;
  /** Not a well-formed multipart body (USAGE). */
  malformed: string;
}

export interface ReceiveFormOptions {
  /** The largest file taken (bytes). */
  maxBytes: number;
  /** Default busboy's: no limit. */
  maxFields?: number;
  /** Where the form's file (field `file`) is written, given its name; undefined skips the part. */
  saveTo(fileName: string): Promise<string | undefined> | string | undefined;
  words: FormWords;
}

export interface ReceivedForm {
  /** The text fields by name (the last of a name wins). */
  fields: Record<string, string>;
  /** The file written, when the form held one. */
  file?: { name: string; path: string };
}

/**
 * Reads a multipart form post: its text fields, and its one file streamed to disk. Every way the
 * body can fail becomes a CrmSyncError the person can act on (all of @fastify/multipart's limits
 * are HTTP 413; only the size limit is about the file being large). The form token is among the
 * fields: the caller checks it after the parts are read (a browser may send it after the file).
 */
export async function receiveForm(request: FastifyRequest, o: ReceiveFormOptions): Promise<ReceivedForm> {
  const fields: Record<string, string> = {};
  let file: ReceivedForm['file'];
  const limits = { fileSize: o.maxBytes, files: 1, ...(o.maxFields !== undefined ? { fields: o.maxFields } : {}) };
  try {
    for await (const part of request.parts({ limits })) {
      if (part.type === 'field') {
        if (typeof part.value === 'string') fields[part.fieldname] = part.value;
        continue;
      }
      const path = part.fieldname === 'file' && file === undefined ? await o.saveTo(part.filename) : undefined;
      if (path === undefined) {
        part.file.resume();
        continue;
      }
      file = { name: part.filename, path };
      await pipeline(part.file, createWriteStream(path));
      if (part.file.truncated) throw new CrmSyncError('INPUT_TOO_LARGE', o.words.tooLarge);
    }
  } catch (err) {
    if (isCrmSyncError(err)) throw err;
    throw formError(err, o.words);
  }
  return file !== undefined ? { fields, file } : { fields };
}

function formError(err: unknown, words: FormWords): CrmSyncError {
  const status = typeof err === 'object' && err !== null && 'statusCode' in err ? Number(err.statusCode) : 500;
  // busboy's own errors (no boundary, cut-off part, bad header) are plain Errors: the client's fault.
  if (status !== 413) return new CrmSyncError('USAGE', words.malformed, { cause: err });
  const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
  if (code === 'FST_FILES_LIMIT') return new CrmSyncError('USAGE', words.tooManyFiles, { cause: err });
  if (code === 'FST_FIELDS_LIMIT' || code === 'FST_PARTS_LIMIT')
    return new CrmSyncError('USAGE', words.tooManyFields, { cause: err });
  return new CrmSyncError('INPUT_TOO_LARGE', words.tooLarge, { cause: err });
}
