/**
 * Strings kept outside the JavaScript heap: one growing byte buffer holding them all (UTF-8),
 * with typed arrays for where each starts and ends and an open-addressing hash from a string to
 * the entries that hold it. A plan's index of 100,000 CRM records kept as Maps of strings was
 * ~30 MB of live heap, and V8 lets a busy process's heap grow to several times what is live
 * before it collects: the plan's peak RSS (bench/RESULTS.md, "Change control"). Here the same
 * strings are ~15 MB of buffers V8 does not scale, and no per-entry objects.
 *
 * Entries are numbered from 0 in the order added; an entry's string can be replaced (`set`)
 * and entries are never removed.
 */
export class StringTable {
  /**
   * The bytes, in chunks that double from FIRST_CHUNK up to CHUNK: a table grows without copying
   * (a grown single buffer would leave each smaller one to the next full GC), and a small table
   * (a drift check's one page) stays small. A string never spans two chunks.
   */
  readonly #chunks: Buffer[] = [];
  #used = 0;
  /** By entry: its chunk, and where in it its bytes start. */
  #chunk = new Int32Array(64);
  #start = new Int32Array(64);
  #length = new Int32Array(64);
  #count = 0;
  /** Hash table of entry + 1 (0: empty), linear probing; only when `hashed`. */
  #table: Int32Array | undefined;
  #hashes: Int32Array | undefined;

  /** `hashed`: entries can be found by their string (`find`, `findAll`). */
  constructor(hashed = false) {
    if (hashed) {
      this.#table = new Int32Array(128);
      this.#hashes = new Int32Array(64);
    }
  }

  get size(): number {
    return this.#count;
  }

  /** Adds `text` as the next entry; returns its number. */
  add(text: string): number {
    const n = this.#count;
    if (n === this.#start.length) this.#growEntries();
    this.#count++;
    this.#store(n, text);
    if (this.#table) {
      const h = hash(text);
      this.#hashes![n] = h;
      if (this.#count * 2 > this.#table.length) this.#rehash(this.#table.length * 2);
      else this.#place(n, h);
    }
    return n;
  }

  /** Replaces entry `n`'s string (not for a hashed table: its hash would not follow). */
  set(n: number, text: string): void {
    if (this.#table) throw new Error('StringTable.set: a hashed table keeps its strings');
    this.#store(n, text);
  }

  get(n: number): string {
    return this.#chunks[this.#chunk[n]!]!.toString('utf8', this.#start[n]!, this.#start[n]! + this.#length[n]!);
  }

  /** The first entry holding `text`, or -1. */
  find(text: string): number {
    let found = -1;
    this.#probe(text, (n) => {
      found = n;
      return false;
    });
    return found;
  }

  /** Every entry holding `text`, in the order added. */
  findAll(text: string): number[] {
    const out: number[] = [];
    this.#probe(text, (n) => {
      out.push(n);
      return true;
    });
    return out.sort((a, b) => a - b);
  }

  #probe(text: string, each: (n: number) => boolean): void {
    const table = this.#table;
    if (!table) throw new Error('StringTable: not a hashed table');
    const h = hash(text);
    const mask = table.length - 1;
    for (let i = h & mask; table[i] !== 0; i = (i + 1) & mask) {
      const n = table[i]! - 1;
      if (this.#hashes![n] === h && this.get(n) === text && !each(n)) return;
    }
  }

  #store(n: number, text: string): void {
    const need = Buffer.byteLength(text);
    let last = this.#chunks[this.#chunks.length - 1];
    if (!last || this.#used + need > last.length) {
      const size = last ? Math.min(CHUNK, last.length * 2) : FIRST_CHUNK;
      last = Buffer.allocUnsafeSlow(Math.max(size, need));
      this.#chunks.push(last);
      this.#used = 0;
    }
    last.write(text, this.#used, 'utf8');
    this.#chunk[n] = this.#chunks.length - 1;
    this.#start[n] = this.#used;
    this.#length[n] = need;
    this.#used += need;
  }

  #growEntries(): void {
    const grow = (a: Int32Array) => {
      const b = new Int32Array(a.length * 2);
      b.set(a);
      return b;
    };
    this.#chunk = grow(this.#chunk);
    this.#start = grow(this.#start);
    this.#length = grow(this.#length);
    if (this.#hashes) this.#hashes = grow(this.#hashes);
  }

  #place(n: number, h: number): void {
    const table = this.#table!;
    const mask = table.length - 1;
    let i = h & mask;
    while (table[i] !== 0) i = (i + 1) & mask;
    table[i] = n + 1;
  }

  #rehash(size: number): void {
    this.#table = new Int32Array(size);
    for (let n = 0; n < this.#count; n++) this.#place(n, this.#hashes![n]!);
  }
}

const FIRST_CHUNK = 4096;
const CHUNK = 1 << 20;

/** FNV-1a over UTF-16 code units: cheap, and spreads ids and e-mail addresses well. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}
