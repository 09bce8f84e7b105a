import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { StringDecoder } from 'node:string_decoder';
import { createGunzip, createGzip } from 'node:zlib';
import { z } from 'zod';
import type { ListResource } from '../crm/index.js';
import { COMPARABLE_FIELDS, RecordIndex } from '../reconcile/index.js';
import { MAX_SHARED_SNAPSHOT_BYTES } from '../runs/index.js';

/*
 * A before-value pass as the worker processes of a workspace share it (DriftCheck, through the
 * `before` LookupPassBoard): gzip'd lines, a JSON header saying whose records from which read,
 * then one JSON string per record, packed as RecordIndex keeps it (the id, then each comparable
 * field's canonical value). Both ways stream, so neither side holds the whole text: a reader
 * holds the gzip'd body and the index it fills. A snapshot that fails any check is not used:
 * the reader reads the list itself.
 */

/** The layout of the body: a body of any other (an older or newer crm-sync) is not read. */
const FORMAT = 'crm-sync/before-pass/1';

/**
 * The most a snapshot may take unzipped (bytes): a writer does not share a larger one, and a
 * reader stops unzipping one there (a 100,000-deal list is ~23 MB, ~3 MB gzip'd).
 */
export const MAX_BEFORE_SNAPSHOT_JSON_BYTES = 96 * 1024 * 1024;

/** The longest line (the header, or one packed record) a snapshot may have, in characters. */
const MAX_LINE_CHARS = 1024 * 1024;

/** Lines are handed to gzip in batches of about this many characters. */
const BATCH_CHARS = 64 * 1024;

/** Whose records, from which read: every field must match what the reader expects. */
export interface BeforeSnapshotOrigin {
  workspace: string;
  /** The CRM's address (CrmClient.baseUrl): a workspace pointed elsewhere reads anew. */
  crm: string;
  resource: ListResource;
  /** When the pass began (Redis clock): the board's snapStartedAt. */
  startedAt: number;
}

const headerSchema = z.object({
  format: z.literal(FORMAT),
  workspace: z.string(),
  crm: z.string(),
  resource: z.string(),
  fields: z.array(z.string()),
  startedAt: z.number(),
  durationMs: z.number().nonnegative(),
  records: z.number().int().nonnegative(),
});

class TooLarge extends Error {
  constructor(
    readonly bytes: number,
    readonly zipped: boolean,
  ) {
    super('snapshot too large');
  }
}

/**
 * The body for the board, or `tooLarge` when it would be larger than a reader may unzip
 * (MAX_BEFORE_SNAPSHOT_JSON_BYTES) or Redis should keep (MAX_SHARED_SNAPSHOT_BYTES gzip'd).
 */
export async function encodeBeforeSnapshot(
  origin: BeforeSnapshotOrigin,
  durationMs: number,
  index: RecordIndex,
): Promise<{ body: Buffer } | { tooLarge: { bytes: number; zipped: boolean } }> {
  const header = {
    format: FORMAT,
    ...origin,
    fields: COMPARABLE_FIELDS[origin.resource],
    durationMs,
    records: index.size,
  };
  let raw = 0;
  async function* lines(): AsyncGenerator<string> {
    let batch = `${JSON.stringify(header)}\n`;
    const flush = () => {
      raw += Buffer.byteLength(batch);
      if (raw > MAX_BEFORE_SNAPSHOT_JSON_BYTES) throw new TooLarge(raw, false);
      const out = batch;
      batch = '';
      return out;
    };
    for (const packed of index.packed()) {
      const line = JSON.stringify(packed);
      if (line.length >= MAX_LINE_CHARS) throw new TooLarge(line.length, false);
      batch += `${line}\n`;
      if (batch.length >= BATCH_CHARS) yield flush();
    }
    yield flush();
  }
  const chunks: Buffer[] = [];
  let zipped = 0;
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      zipped += chunk.length;
      if (zipped > MAX_SHARED_SNAPSHOT_BYTES) return done(new TooLarge(zipped, true));
      chunks.push(chunk);
      done();
    },
  });
  try {
    await pipeline(Readable.from(lines()), createGzip(), sink);
  } catch (err) {
    if (err instanceof TooLarge) return { tooLarge: { bytes: err.bytes, zipped: err.zipped } };
    throw err;
  }
  return { body: Buffer.concat(chunks) };
}

/**
 * The index and the pass's duration (ms) of a shared body, or undefined when it is not one this
 * process may use: not gzip or cut short, larger than MAX_BEFORE_SNAPSHOT_JSON_BYTES unzipped
 * (or a line longer than MAX_LINE_CHARS),
 * not of this layout, another workspace's, CRM's, list's or pass's, fields of another version,
 * or a record that does not unpack to one value per field, or more or fewer records than its
 * header says. Never throws.
 */
export async function decodeBeforeSnapshot(
  body: Buffer,
  expect: BeforeSnapshotOrigin,
): Promise<{ index: RecordIndex; durationMs: number } | undefined> {
  if (body.length > MAX_SHARED_SNAPSHOT_BYTES) return undefined;
  const fields: readonly string[] = COMPARABLE_FIELDS[expect.resource];
  const index = new RecordIndex(expect.resource, 'id');
  const text = new StringDecoder('utf8');
  let header: z.infer<typeof headerSchema> | undefined;
  let rest = '';
  let raw = 0;
  let records = 0;
  /** False when the line says the snapshot is not one to use. */
  const take = (line: string): boolean => {
    if (!header) {
      const parsed = headerSchema.safeParse(JSON.parse(line));
      if (!parsed.success) return false;
      const h = parsed.data;
      header = h;
      return (
        h.workspace === expect.workspace &&
        h.crm === expect.crm &&
        h.resource === expect.resource &&
        h.startedAt === expect.startedAt &&
        h.fields.join('\n') === fields.join('\n')
      );
    }
    const packed: unknown = JSON.parse(line);
    records++;
    return typeof packed === 'string' && records <= header.records && index.addPacked(packed);
  };
  try {
    const unzipped = Readable.from([body]).pipe(createGunzip());
    for await (const chunk of unzipped as AsyncIterable<Buffer>) {
      raw += chunk.length;
      if (raw > MAX_BEFORE_SNAPSHOT_JSON_BYTES) {
        unzipped.destroy();
        return undefined;
      }
      const piece = text.write(chunk);
      let from = 0;
      for (let nl = piece.indexOf('\n'); nl >= 0; nl = piece.indexOf('\n', from)) {
        const line = rest + piece.slice(from, nl);
        rest = '';
        from = nl + 1;
        if (!take(line)) {
          unzipped.destroy();
          return undefined;
        }
      }
      rest += piece.slice(from);
      if (rest.length >= MAX_LINE_CHARS) {
        unzipped.destroy();
        return undefined;
      }
    }
  } catch {
    // Not gzip, cut short, a line that is not JSON: a snapshot this process cannot use.
    return undefined;
  }
  const ended = header !== undefined && rest + text.end() === '' && records === header.records;
  return ended ? { index, durationMs: header!.durationMs } : undefined;
}
