import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { CrmSyncError } from '../errors/index.js';
import { firstInvalidUtf8, sniffEncoding } from './utf8.js';

const CHUNK_BYTES = 64 * 1024;
const LF = 0x0a;

/** Counts line feeds, so an encoding error can name its line without keeping old chunks. */
function countLf(bytes: Uint8Array, end: number): number {
  let n = 0;
  for (let i = bytes.indexOf(LF); i !== -1 && i < end; i = bytes.indexOf(LF, i + 1)) n++;
  return n;
}

function unreadable(path: string, err: unknown): CrmSyncError {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const reason =
    code === 'ENOENT'
      ? 'the file does not exist'
      : code === 'EACCES' || code === 'EPERM'
        ? 'permission denied'
        : code === 'EISDIR'
          ? 'it is a directory, not a file'
          : err instanceof Error
            ? err.message
            : String(err);
  return new CrmSyncError('INPUT_UNREADABLE', `cannot read ${path}: ${reason}`, { cause: err });
}

/**
 * Streams a file as UTF-8 text in bounded chunks. A UTF-8 BOM is dropped; other encodings and
 * invalid bytes are fatal (INPUT_ENCODING), because guessing a legacy code page would silently
 * corrupt names and emails that then get written to the CRM.
 */
export async function* readTextChunks(path: string, onBytes: (bytes: number) => void): AsyncGenerator<string> {
  try {
    if ((await stat(path)).isDirectory()) throw Object.assign(new Error('directory'), { code: 'EISDIR' });
  } catch (err) {
    throw unreadable(path, err);
  }
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const stream = createReadStream(path, { highWaterMark: CHUNK_BYTES });
  let first = true;
  let linesBefore = 0;
  let offset = 0;
  const iterator = stream[Symbol.asyncIterator]();
  try {
    for (;;) {
      let step: IteratorResult<unknown>;
      try {
        step = await iterator.next();
      } catch (err) {
        throw unreadable(path, err);
      }
      if (step.done) break;
      let bytes = step.value as Buffer;
      onBytes(bytes.length);
      if (first) {
        first = false;
        const sniffed = sniffEncoding(bytes);
        if (sniffed.problem !== undefined) throw new CrmSyncError('INPUT_ENCODING', `${path}: ${sniffed.problem}`);
        bytes = bytes.subarray(sniffed.bomLength);
        offset += sniffed.bomLength;
      }
      let text: string;
      try {
        text = decoder.decode(bytes, { stream: true });
      } catch {
        const at = Math.max(0, firstInvalidUtf8(bytes));
        throw invalidUtf8(path, linesBefore + countLf(bytes, at) + 1, offset + at);
      }
      linesBefore += countLf(bytes, bytes.length);
      offset += bytes.length;
      if (text.length > 0) yield text;
    }
    try {
      const tail = decoder.decode();
      if (tail.length > 0) yield tail;
    } catch {
      throw invalidUtf8(path, linesBefore + 1, offset);
    }
  } finally {
    stream.destroy();
  }
}

function invalidUtf8(path: string, line: number, byteOffset: number): CrmSyncError {
  return new CrmSyncError(
    'INPUT_ENCODING',
    `${path}: line ${line} is not valid UTF-8 (byte offset ${byteOffset}); the file is probably in a legacy ` +
      'encoding such as Windows-1252 or Latin-1; save it as UTF-8 (CSV UTF-8 in Excel)',
  );
}
