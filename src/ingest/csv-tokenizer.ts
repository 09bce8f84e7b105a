/**
 * Streaming CSV tokenizer (RFC 4180 plus what spreadsheets write: CRLF, LF or CR line ends,
 * quoted fields with delimiters, doubled quotes and line breaks).
 *
 * Why not csv-parse: it counts a CRLF inside a quoted field as two lines (wrong line numbers
 * for every later row), and with `skip_records_with_error` an invalid quote or an oversized
 * record makes it drop the rest of the current buffer without a word: rows silently lost.
 * Here every record knows the physical line it starts on, a malformed record becomes one
 * error record and tokenizing resumes at the next line, and a record over the size limit is
 * discarded while it streams by, so memory stays bounded by `maxRecordBytes`.
 */

export interface CsvRawRecord {
  /** Physical line (1-based) where the record starts. */
  line: number;
  /** Fields read (for an error record: those complete before the error). */
  fields: string[];
  error?: { code: 'INPUT_PARSE' | 'INPUT_TOO_LARGE'; message: string };
}

export interface CsvTokenizerOptions {
  /** One character. */
  delimiter: string;
  /** Records longer than this are reported, not kept. */
  maxRecordBytes: number;
}

const QUOTE = 0x22;
const LF = 0x0a;
const CR = 0x0d;

const FIELD_START = 0;
const UNQUOTED = 1;
const QUOTED = 2;
/** Just saw a quote inside a quoted field: either an escaped quote or the closing one. */
const QUOTE_IN_QUOTED = 3;
/** After a malformed record: discard up to the next line break. */
const SKIP = 4;

export class CsvTokenizer {
  private readonly delim: number;
  private readonly maxRecordBytes: number;
  private state = FIELD_START;
  private line = 1;
  private recordLine = 1;
  private prevCr = false;
  private fields: string[] = [];
  private part = '';
  private recordChars = 0;
  private tooLarge = false;
  private quotedInRecord = false;
  private error: CsvRawRecord['error'];

  constructor(options: CsvTokenizerOptions) {
    this.delim = options.delimiter.charCodeAt(0);
    this.maxRecordBytes = options.maxRecordBytes;
  }

  /** Tokenizes `chunk`, appending every record it completes to `out`. */
  push(chunk: string, out: CsvRawRecord[]): void {
    let seg = 0;
    const n = chunk.length;
    for (let i = 0; i < n; i++) {
      const c = chunk.charCodeAt(i);
      const isCr = c === CR;
      const isLf = c === LF;
      const crlfTail = isLf && this.prevCr;
      this.prevCr = isCr;
      if (isCr || (isLf && !crlfTail)) this.line++;
      if (++this.recordChars > this.maxRecordBytes && !this.tooLarge) this.markTooLarge();
      switch (this.state) {
        case FIELD_START:
          if (crlfTail) {
            // The CR already ended the record; its LF is not a new (blank) line.
            this.recordChars--;
            this.recordLine = this.line;
          } else if (c === QUOTE) {
            this.state = QUOTED;
            this.quotedInRecord = true;
            seg = i + 1;
          } else if (c === this.delim) {
            this.endField();
          } else if (isCr || isLf) {
            this.endField();
            this.endRecord(out);
          } else {
            this.state = UNQUOTED;
            seg = i;
          }
          break;
        case UNQUOTED:
          if (c !== this.delim && !isCr && !isLf) {
            // Fast path for the common case: run to the end of the field without per-character
            // bookkeeping (nothing skipped here is a line break, a CR or a delimiter).
            let j = i + 1;
            while (j < n) {
              const d = chunk.charCodeAt(j);
              if (d === this.delim || d === LF || d === CR) break;
              j++;
            }
            this.recordChars += j - 1 - i;
            if (this.recordChars > this.maxRecordBytes && !this.tooLarge) this.markTooLarge();
            i = j - 1;
            break;
          }
          // A quote inside an unquoted field (5" screen) was kept literally above, as spreadsheets mean it.
          this.append(chunk, seg, i);
          this.endField();
          this.state = FIELD_START;
          if (c !== this.delim) this.endRecord(out);
          break;
        case QUOTED:
          if (c === QUOTE) {
            this.append(chunk, seg, i);
            this.state = QUOTE_IN_QUOTED;
          }
          break;
        case QUOTE_IN_QUOTED:
          if (c === QUOTE) {
            // Doubled quote: the second one starts the next segment, so one quote is kept.
            seg = i;
            this.state = QUOTED;
          } else if (c === this.delim || isCr || isLf) {
            this.endField();
            this.state = FIELD_START;
            if (c !== this.delim) this.endRecord(out);
          } else {
            this.error = {
              code: 'INPUT_PARSE',
              message:
                `line ${this.line}: unexpected ${JSON.stringify(chunk[i])} after the closing quote of field ` +
                `${this.fields.length + 1} (a quote inside a quoted value must be doubled: "")`,
            };
            this.state = SKIP;
          }
          break;
        default: // SKIP
          if (isCr || isLf) {
            this.state = FIELD_START;
            this.endRecord(out);
          }
      }
    }
    if (this.state === UNQUOTED || this.state === QUOTED) this.append(chunk, seg, n);
  }

  /** Finishes the last record at end of input. */
  end(out: CsvRawRecord[]): void {
    if (this.state === QUOTED) {
      this.tooLarge = false;
      this.error = {
        code: 'INPUT_PARSE',
        message:
          `line ${this.recordLine}: a quoted value in this row is never closed; the file ends inside it at line ` +
          `${this.line}, so everything after this point could not be read (look for a stray " character)`,
      };
      this.endRecord(out);
    } else if (this.state !== FIELD_START || this.recordChars > 0) {
      // Last line without a line break (or ending in a delimiter: one more empty field).
      if (this.state !== SKIP) this.endField();
      this.endRecord(out);
    }
    this.state = FIELD_START;
  }

  private append(chunk: string, from: number, to: number): void {
    if (!this.tooLarge && to > from) this.part += chunk.slice(from, to);
  }

  private endField(): void {
    if (!this.tooLarge && this.error === undefined) this.fields.push(this.part);
    this.part = '';
  }

  private markTooLarge(): void {
    this.tooLarge = true;
    this.fields = [];
    this.part = '';
  }

  private endRecord(out: CsvRawRecord[]): void {
    const fields = this.fields;
    const blank = fields.length === 1 && !this.quotedInRecord && (fields[0] ?? '').trim() === '';
    if (!this.tooLarge && this.error === undefined && this.recordChars * 3 > this.maxRecordBytes) {
      // Characters are a lower bound of bytes; count exactly only when the bound is not enough.
      let bytes = fields.length;
      for (const f of fields) bytes += Buffer.byteLength(f);
      if (bytes > this.maxRecordBytes) this.tooLarge = true;
    }
    if (this.tooLarge && this.error === undefined) {
      out.push({
        line: this.recordLine,
        fields: [],
        error: {
          code: 'INPUT_TOO_LARGE',
          message: `line ${this.recordLine}: the row is larger than the limit of ${this.maxRecordBytes} bytes`,
        },
      });
    } else if (this.error !== undefined) {
      out.push({ line: this.recordLine, fields, error: this.error });
    } else if (!blank) {
      out.push({ line: this.recordLine, fields });
    }
    this.fields = [];
    this.part = '';
    this.recordChars = 0;
    this.tooLarge = false;
    this.quotedInRecord = false;
    this.error = undefined;
    this.recordLine = this.line;
  }
}
