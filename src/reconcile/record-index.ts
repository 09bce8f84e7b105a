import { DEFAULTS } from '../config/index.js';
import type { CrmClient, ListResource } from '../crm/index.js';
import { packRecord, unpackRecord, type IndexedRecord } from './compare.js';
import { checkMatchKey, normaliseKey, recordKey, type AnyRecord } from './resource-fields.js';

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
  /** Called after each page with the pages and records read so far. Default none. */
  onPage?: (progress: { pages: number; records: number }) => void;
  /** Also keep each record's created_at (verify tells when a deal was made). Default false. */
  keepCreatedAt?: boolean;
  /** Also keep each record's place in the list (placeOf: a plan's hint for apply's drift check). Default false. */
  keepPlaces?: boolean;
}

/**
 * The CRM's current records of one resource, by id and by a match key, kept as one packed
 * string per record (id + canonical comparable fields) so 100,000 records stay a few tens of
 * MB. A key held by several records keeps them all: such rows are ambiguous, never guessed.
 */
export class RecordIndex {
  readonly resource: ListResource;
  readonly matchKey: string;
  /** List requests answered while building (0 for an index filled by hand). */
  pages = 0;
  readonly #byId = new Map<string, string>();
  readonly #byKey = new Map<string, string | string[]>();
  /** created_at (epoch ms) by id, when asked to keep it. */
  #created: Map<string, number> | undefined;
  /** Place in the list as read (0-based, in list order) by id, when asked to keep it. */
  #places: Map<string, number> | undefined;

  /** `keepCreatedAt`: also keep each record's created_at (createdAt); `keepPlaces`: its place in the list (placeOf). */
  constructor(
    resource: ListResource,
    matchKey = 'id',
    options: { keepCreatedAt?: boolean; keepPlaces?: boolean } = {},
  ) {
    this.resource = resource;
    this.matchKey = checkMatchKey(resource, matchKey);
    if (options.keepCreatedAt) this.#created = new Map();
    if (options.keepPlaces) this.#places = new Map();
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
      options.onPage?.({ pages: index.pages, records: index.size });
    }
    return index;
  }

  get size(): number {
    return this.#byId.size;
  }

  add(record: AnyRecord): void {
    const packed = packRecord(this.resource, record);
    if (this.#places && !this.#byId.has(record.id)) this.#places.set(record.id, this.#byId.size);
    this.#byId.set(record.id, packed);
    this.#created?.set(record.id, Date.parse(record.created_at));
    if (this.matchKey === 'id') return;
    const key = recordKey(record, this.matchKey);
    if (key === '') return;
    const held = this.#byKey.get(key);
    if (held === undefined) this.#byKey.set(key, packed);
    else if (typeof held === 'string') this.#byKey.set(key, [held, packed]);
    else held.push(packed);
  }

  /** Every record, in no particular order. */
  *all(): IterableIterator<IndexedRecord> {
    for (const packed of this.#byId.values()) yield unpackRecord(this.resource, packed);
  }

  /** The record's place in the list when read (0-based; page = floor(place / page size) + 1); undefined unless kept. */
  placeOf(id: string): number | undefined {
    return this.#places?.get(id);
  }

  /** When the record was made (epoch ms, the CRM's record clock); undefined unless kept. */
  createdAt(id: string): number | undefined {
    return this.#created?.get(id);
  }

  byId(id: string): IndexedRecord | undefined {
    const packed = this.#byId.get(id.trim());
    return packed === undefined ? undefined : unpackRecord(this.resource, packed);
  }

  /** Every record whose match key equals `value` (normalised like the records' keys). */
  lookup(value: unknown): IndexedRecord[] {
    if (this.matchKey === 'id') {
      const one = this.byId(normaliseKey('id', value));
      return one ? [one] : [];
    }
    const held = this.#byKey.get(normaliseKey(this.matchKey, value));
    if (held === undefined) return [];
    return (typeof held === 'string' ? [held] : held).map((p) => unpackRecord(this.resource, p));
  }
}
