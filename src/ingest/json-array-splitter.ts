/**
 * Splits a streamed JSON array into the texts of its elements, each with the line it starts on.
 *
 * Hand-written rather than a streaming JSON library because we need the line number of every
 * element (for row results) and the ability to report one bad element and carry on; the
 * libraries give neither. It only tracks strings, escapes and bracket depth; each element's
 * text is then checked by JSON.parse, so a malformed element is a row problem while the
 * array's structure is still intact. When the structure itself breaks, nothing after that
 * point can be located, so the splitter reports where and stops.
 */

export type JsonPiece =
  | { kind: 'element'; line: number; text: string }
  | { kind: 'too-large'; line: number }
  /** The document breaks here; the splitter ignores everything after it. */
  | { kind: 'broken'; line: number; message: string }
  /** The document is not an array at all (first significant character). */
  | { kind: 'not-array'; line: number; found: string };

const BEFORE = 0;
const EXPECT_ELEMENT = 1;
const IN_ELEMENT = 2;
const AFTER_ELEMENT = 3;
const DONE = 4;
const BROKEN = 5;

function isSpace(c: string): boolean {
  return c === ' ' || c === '\n' || c === '\r' || c === '\t';
}

export class JsonArraySplitter {
  private state = BEFORE;
  private line = 1;
  private parts: string[] = [];
  private chars = 0;
  private tooLarge = false;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private elementLine = 1;

  constructor(private readonly maxRecordBytes: number) {}

  push(chunk: string, out: JsonPiece[]): void {
    let seg = 0;
    const n = chunk.length;
    for (let i = 0; i < n && this.state !== BROKEN; i++) {
      const c = chunk[i] as string;
      if (c === '\n') this.line++;
      switch (this.state) {
        case BEFORE:
          if (c === '[') this.state = EXPECT_ELEMENT;
          else if (!isSpace(c)) {
            out.push({ kind: 'not-array', line: this.line, found: c });
            this.state = BROKEN;
          }
          break;
        case EXPECT_ELEMENT:
        case AFTER_ELEMENT:
          if (isSpace(c)) break;
          if (c === ']')
            this.state = DONE; // also accepts a trailing comma: nothing is lost by it
          else if (this.state === AFTER_ELEMENT && c === ',') this.state = EXPECT_ELEMENT;
          else if (this.state === EXPECT_ELEMENT && c !== ',') {
            this.startElement(c);
            seg = i;
          } else
            this.breakAt(
              out,
              `expected ${this.state === AFTER_ELEMENT ? "',' or ']'" : 'a value'}, found ${JSON.stringify(c)}`,
            );
          break;
        case IN_ELEMENT:
          if (this.inString) {
            if (this.escaped) this.escaped = false;
            else if (c === '\\') this.escaped = true;
            else if (c === '"') this.inString = false;
            // Raw line breaks are invalid inside JSON strings; JSON.parse will say so for the row.
          } else if (c === '"') this.inString = true;
          else if (c === '{' || c === '[') this.depth++;
          else if (c === '}' || c === ']' || c === ',' || isSpace(c)) {
            if (this.depth === 0) {
              // End of a bare value (number, literal): this character belongs to the array.
              this.take(chunk, seg, i);
              this.emit(out);
              if (c === ',') this.state = EXPECT_ELEMENT;
              else if (c === ']') this.state = DONE;
              else if (c === '}') this.breakAt(out, `unexpected "}"`);
              else this.state = AFTER_ELEMENT;
            } else if (c === '}' || c === ']') {
              if (--this.depth === 0) {
                this.take(chunk, seg, i + 1);
                this.emit(out);
                this.state = AFTER_ELEMENT;
              }
            }
          }
          break;
        case DONE:
          if (!isSpace(c))
            this.breakAt(out, `unexpected text after the end of the array (${JSON.stringify(c)}); it was not read`);
          break;
      }
      if (this.state === IN_ELEMENT && ++this.chars > this.maxRecordBytes && !this.tooLarge) {
        this.tooLarge = true;
        this.parts = [];
      }
    }
    if (this.state === IN_ELEMENT) this.take(chunk, seg, n);
  }

  end(out: JsonPiece[]): void {
    if (this.state === IN_ELEMENT && this.depth === 0 && !this.inString) {
      this.emit(out);
      this.state = AFTER_ELEMENT;
    }
    if (this.state === IN_ELEMENT) {
      this.breakAt(out, `the file ends in the middle of the row that starts on line ${this.elementLine}`);
    } else if (this.state === EXPECT_ELEMENT || this.state === AFTER_ELEMENT) {
      this.breakAt(out, `the file ends before the array is closed with "]"`);
    }
  }

  private startElement(c: string): void {
    this.state = IN_ELEMENT;
    this.elementLine = this.line;
    this.parts = [];
    this.chars = 0;
    this.tooLarge = false;
    this.inString = c === '"';
    this.escaped = false;
    this.depth = c === '{' || c === '[' ? 1 : 0;
  }

  private take(chunk: string, from: number, to: number): void {
    if (!this.tooLarge && to > from) this.parts.push(chunk.slice(from, to));
  }

  private emit(out: JsonPiece[]): void {
    if (this.tooLarge) out.push({ kind: 'too-large', line: this.elementLine });
    else out.push({ kind: 'element', line: this.elementLine, text: this.parts.join('') });
    this.parts = [];
  }

  private breakAt(out: JsonPiece[], what: string): void {
    out.push({
      kind: 'broken',
      line: this.line,
      message: `line ${this.line}: the JSON document is malformed here: ${what}; the rest of the file cannot be read`,
    });
    this.state = BROKEN;
    this.parts = [];
  }
}
