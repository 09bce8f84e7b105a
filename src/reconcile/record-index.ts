import { DEFAULTS } from '../config/index.js';
import type { CrmClient, ListResource } from '../crm/index.js';
import { PACK_UNIT, packRecord, unpackRecord, type IndexedRecord } from './compare.js';
import { StringTable } from './string-table.js';
import { checkMatchKey, COMPARABLE_FIELDS, normaliseKey, recordKey, type AnyRecord } from './resource-fields.js';

export interface BuildIndexOptions {
  resource: ListResource;
  /** Key rows are matched by (`id`, `email`, `unique_number`, `name`, …). Default: `id` only. */
  matchKey?: string;
  /** Records per list request. Default DEFAULTS.client.pageSize (100, the spec's recommended maximum). */
  pageSize?: number;
  /** List version. Default: the client's (the workspace's `listVersion`). */
  version?: 'v1' | 'v2';
  /** Stops paging. Default none. */
  signal?: AbortSignal;
  /**
   * Awaited before each page request: the workspace's shared request budget takes its token, so
   * paging a list beside running workers stays within the limit they keep. Default none.
   */
  beforeFetch?: () => Promise<unknown>;
  /** Called with each page's records as read (reconcile collects the references they show). Default none. */
  onRecords?: (records: readonly AnyRecord[]) => void;
  /** Called after each page with the pages and records read so far. Default none. */
  onPage?: (progress: { pages: number; records: number }) => void;
  /** Also keep each record's created_at (verify tells when a deal was made). Default false. */
  keepCreatedAt?: boolean;
  /** Also keep each record's place in the list (placeOf: a plan's hint for apply's drift check). Default false. */
  keepPlaces?: boolean;
}

/**
 * The CRM's current records of one resource, by id and by a match key. Each record is kept as
 * its packed comparable fields (id + canonical values) in StringTables, outside the JavaScript
 * heap: 100,000 records are ~15 MB of buffers and a few typed arrays, not ~30 MB of live heap
 * that V8 would let grow severalfold before collecting (a plan's peak RSS). A record's slot is
 * its place in the list as read. A key held by several records keeps them all: such rows are
 * ambiguous, never guessed.
 */
export class RecordIndex {
  readonly resource: ListResource;
  readonly matchKey: string;
  /** List requests answered while building (0 for an index filled by hand). */
  pages = 0;
  /** Record ids, one entry per record: the entry's number is the record's slot (its place in the list as read). */
  readonly #ids = new StringTable(true);
  /** By slot: the packed record less its id (unpackRecord puts the id back). */
  readonly #records = new StringTable();
  /** Match-key values, one entry per record that has one; #keySlots says whose. */
  readonly #keys = new StringTable(true);
  #keySlots = new Int32Array(64);
  /** created_at (epoch ms) by slot, when asked to keep it. */
  #created: Float64Array | undefined;
  readonly #keepPlaces: boolean;

  /** `keepCreatedAt`: also keep each record's created_at (createdAt); `keepPlaces`: answer placeOf. */
  constructor(
    resource: ListResource,
    matchKey = 'id',
    options: { keepCreatedAt?: boolean; keepPlaces?: boolean } = {},
  ) {
    this.resource = resource;
    this.matchKey = checkMatchKey(resource, matchKey);
    if (options.keepCreatedAt) this.#created = new Float64Array(64);
    this.#keepPlaces = options.keepPlaces === true;
  }

  /** Pages the whole list (to its last page, retrying 429 and transient failures). */
  static async build(client: CrmClient, options: BuildIndexOptions): Promise<RecordIndex> {
    const index = new RecordIndex(options.resource, options.matchKey ?? 'id', {
      ...(options.keepCreatedAt ? { keepCreatedAt: true } : {}),
      ...(options.keepPlaces ? { keepPlaces: true } : {}),
    });
    const pages = client.pages(options.resource, {
      pageSize: options.pageSize ?? DEFAULTS.client.pageSize,
      ...(options.version ? { version: options.version } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.beforeFetch ? { beforeFetch: options.beforeFetch } : {}),
    });
    for await (const page of pages) {
      index.pages += 1;
      for (const record of page.records) index.add(record);
      options.onRecords?.(page.records);
      options.onPage?.({ pages: index.pages, records: index.size });
    }
    return index;
  }

  get size(): number {
    return this.#ids.size;
  }

  add(record: AnyRecord): void {
    const packed = packRecord(this.resource, record);
    const values = packed.slice(packed.indexOf(PACK_UNIT) + 1);
    let slot = this.#ids.find(record.id);
    if (slot >= 0) this.#records.set(slot, values);
    else {
      slot = this.#ids.add(record.id);
      this.#records.add(values);
    }
    if (this.#created) {
      if (slot >= this.#created.length) this.#created = grown(this.#created, slot);
      this.#created[slot] = Date.parse(record.created_at);
    }
    if (this.matchKey === 'id') return;
    const key = recordKey(record, this.matchKey);
    if (key === '' || this.#keys.findAll(key).some((k) => this.#keySlots[k] === slot)) return;
    const k = this.#keys.add(key);
    if (k >= this.#keySlots.length) this.#keySlots = grown(this.#keySlots, k);
    this.#keySlots[k] = slot;
  }

  /**
   * Adds a record as packed() gave it (a shared snapshot read back; an index by id only). False,
   * and nothing added, when it is not one record of this resource: no id, or not exactly one
   * part per comparable field.
   */
  addPacked(packed: string): boolean {
    if (this.matchKey !== 'id' || this.#created) throw new Error('RecordIndex.addPacked: only for an index by id');
    const cut = packed.indexOf(PACK_UNIT);
    if (cut <= 0 || packed.split(PACK_UNIT).length !== COMPARABLE_FIELDS[this.resource].length + 1) return false;
    const id = packed.slice(0, cut);
    const values = packed.slice(cut + 1);
    const slot = this.#ids.find(id);
    if (slot >= 0) this.#records.set(slot, values);
    else {
      this.#ids.add(id);
      this.#records.add(values);
    }
    return true;
  }

  /** Every record packed (packRecord's form: the id, then each comparable value), in list order. */
  *packed(): IterableIterator<string> {
    for (let slot = 0; slot < this.#ids.size; slot++) yield this.#ids.get(slot) + PACK_UNIT + this.#records.get(slot);
  }

  /** Every record, in list order. */
  *all(): IterableIterator<IndexedRecord> {
    for (let slot = 0; slot < this.#ids.size; slot++) yield this.#record(slot);
  }

  /** The record's slot: its place in the list when read (0-based), whether or not places are kept. */
  slotOf(id: string): number | undefined {
    const slot = this.#ids.find(id.trim());
    return slot < 0 ? undefined : slot;
  }

  /** The record's place in the list when read (0-based; page = floor(place / page size) + 1); undefined unless kept. */
  placeOf(id: string): number | undefined {
    return this.#keepPlaces ? this.slotOf(id) : undefined;
  }

  /** When the record was made (epoch ms, the CRM's record clock); undefined unless kept. */
  createdAt(id: string): number | undefined {
    const slot = this.#created ? this.slotOf(id) : undefined;
    return slot === undefined ? undefined : this.#created![slot];
  }

  byId(id: string): IndexedRecord | undefined {
    const slot = this.slotOf(id);
    return slot === undefined ? undefined : this.#record(slot);
  }

  /** Every record whose match key equals `value` (normalised like the records' keys). */
  lookup(value: unknown): IndexedRecord[] {
    if (this.matchKey === 'id') {
      const one = this.byId(normaliseKey('id', value));
      return one ? [one] : [];
    }
    return this.#keys.findAll(normaliseKey(this.matchKey, value)).map((k) => this.#record(this.#keySlots[k]!));
  }

  #record(slot: number): IndexedRecord {
    return unpackRecord(this.resource, this.#ids.get(slot) + PACK_UNIT + this.#records.get(slot));
  }
}

function grown<T extends Int32Array | Float64Array>(a: T, index: number): T {
  let size = a.length * 2;
  while (size <= index) size *= 2;
  const b = new (a.constructor as new (n: number) => T)(size);
  b.set(a);
  return b;
}
