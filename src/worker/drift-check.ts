import { DEFAULTS } from '../config/index.js';
import type { CrmClient, ListResource } from '../crm/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import {
  BEFORE_PASS_SPACING,
  canonicalFromRow,
  COMPARABLE_FIELDS,
  DRIFT_PAGE_READ_SHARE,
  DRIFT_PASS_SPACING,
  DRIFT_READ_AHEAD_FROM,
  MATCH_KEYS,
  pageOfPlace,
  normaliseKey,
  normaliseName,
  RecordIndex,
  sameCanonical,
  showCanonical,
  type IndexedRecord,
} from '../reconcile/index.js';
import { earliestStamp, type LookupPassBoard, type RowFence } from '../runs/index.js';
import type { PlannedWindow } from '../queue/index.js';
import { sentValues } from './creates/index.js';
import { abortable } from './abortable.js';
import { RUNS_REMEMBERED, type DealKeys, type ReadTime, type ReadUse, type Snapshot } from './list-snapshot.js';
import { SharedBeforePasses } from './shared-before-passes.js';

export interface DriftCheckOptions {
  client: CrmClient;
  /** The workspace's shared request budget: every list page takes a token (the drift pages are in the limit). */
  budget: { take(signal?: AbortSignal): Promise<unknown> };
  /**
   * A list read older than this is read again before a planned update is checked (the
   * workspace's `driftMaxAgeMs`); a read is also fresh for DRIFT_PASS_SPACING × its own duration.
   */
  maxAgeMs: number;
  /**
   * A read serves a plain import's before-values (values, freshValues) until it is this old, or
   * BEFORE_PASS_SPACING × its duration (the workspace's `beforeMaxAgeMs`). Default `maxAgeMs`.
   */
  beforeMaxAgeMs?: number;
  /**
   * The workspace's before-value pass boards, one per list (LookupPassBoard with `before`): a
   * pass that serves before-values is agreed on and shared with every worker process of the
   * workspace through Redis (values, freshValues). Default: none (each process reads its own).
   */
  beforeBoards?: (resource: ListResource) => LookupPassBoard;
  pageSize?: number;
  logger?: Logger;
  /**
   * What checking a planned create needs (checkCreate): the workspace's deal claims and record
   * clock, and the fields its automation may set (the workspace's `automationFields`, as the
   * create lookup ignores them). Default: planned creates cannot be checked (checkCreate throws).
   */
  creates?: { fence: Pick<RowFence, 'claimed' | 'recordClock'>; automationFields?: readonly string[] };
}

/** A create of an applied plan (QueuedRow.planned), and an upsert's `key=value`. */
export interface PlannedCreate extends PlannedWindow {
  /** The applying run: its first check in this process reads the list anew (checkCreate). */
  runId: string;
  match?: string;
}

/**
 * A field a planned update's record no longer holds: its value now and the plan's before-value
 * (canonical). `carried`: a field the row sends unchanged (a deal's name, which the API requires
 * on every update): `planned` is the value sent, which the plan found the record holding.
 */
export interface DriftedField {
  field: string;
  now: string;
  planned: string;
  carried?: true;
}

/**
 * `changed`: the fields the record no longer holds, when it is still in the list (updates only).
 * `already`: fields that hold the value the row sends rather than the plan's before-value — an
 * earlier attempt of the row may have written them, or something else did (RowSender asks the
 * write fence which).
 */
export type DriftAnswer =
  { kind: 'holds'; already?: string[] } | { kind: 'drifted'; message: string; changed?: DriftedField[] };

/** Where a planned update's check looks first (check): the page that held its record when planned. */
export interface CheckAt {
  signal?: AbortSignal;
  /** The record's place in the list when planned (QueuedRow.listPlace). Default: unknown (the whole list is read). */
  place?: number;
}

interface PageRead {
  startedAt: number;
  /** Set once answered: a page is fresh for DRIFT_PASS_SPACING × its read's duration at least. */
  answered?: ReadTime;
  done: Promise<RecordIndex>;
}
/**
 * Before the workspace's record clock is calibrated (no answered create yet), the CRM's clock
 * is known from its `Date` header only (whole seconds): a deal stamped up to this much before
 * the plan still counts as made since it (a drifted create is the safe side of a duplicate).
 */
const UNCALIBRATED_SLACK_MS = 2000;

/**
 * Apply's drift check (docs/architecture.md, "Change control"): before a planned update is sent,
 * its record must still hold the plan's before-values of the fields it changes, and the values it
 * sends unchanged (a deal's required name) — every field the request carries. The spec has no
 * GET by id, so the check reads the resource's list, inside the workspace's request budget:
 * - a planned update that knows where the plan saw its record (its place in the list) reads that
 *   one page, shared by the rows of this process that ask for it while it is fresh (younger than
 *   `maxAgeMs`, or DRIFT_PASS_SPACING × its own duration) — a plan of records that sit together
 *   reads each page about once;
 * - otherwise (no place, the record no longer on that page, or DRIFT_PAGE_READ_SHARE of the
 *   list read page by page in the last window: rows spread over the whole list), one pass over
 *   the whole list, shared by every job of this process and fresh by the same rule. One pass at
 *   a time per resource: rows asking together wait for the same one.
 *
 * What remains: a record edited after the read that the row's check used began, and before the
 * row's request lands, is not seen — a window of at most the read's age (≤ max(maxAgeMs,
 * DRIFT_PASS_SPACING × read duration) + the read itself) plus the row's wait for its token.
 */
export class DriftCheck {
  readonly #o: DriftCheckOptions;
  readonly #snaps = new Map<ListResource, Snapshot>();
  readonly #tails = new Map<ListResource, Promise<Snapshot>>();
  /** Runs whose planned creates this process checked, and since when (#runStart). */
  readonly #runs = new Map<string, number>();
  /** Single pages read (#page), by resource and page number, in the order read. */
  readonly #pageReads = new Map<ListResource, Map<number, PageRead>>();
  /** When this process began its single-page reads, by resource (the drift window's count them). */
  readonly #pageTimes = new Map<ListResource, number[]>();
  /** The list's page count as last answered, by resource. */
  readonly #totalPages = new Map<ListResource, number>();
  /** Before-value passes shared with the workspace's other worker processes (beforeBoards). */
  readonly #sharedPasses: SharedBeforePasses;
  /** Whole-list passes, single-page reads and list pages read in all by this process (logs, tests). */
  readonly stats = { passes: 0, pageReads: 0, pages: 0 };

  constructor(options: DriftCheckOptions) {
    this.#o = options;
    this.#sharedPasses = new SharedBeforePasses(options, {
      snaps: this.#snaps,
      stale: (s, use) => this.#stale(s, undefined, use),
      pass: (resource) => this.#pass(resource),
    });
  }

  /** Before-value passes this process shared with the workspace's others, and theirs it loaded (logs, tests). */
  get sharing(): { readonly shared: number; readonly loaded: number } {
    return this.#sharedPasses.sharing;
  }

  /**
   * Whether record `id` still holds `expect` (canonical before-values by field), and every other
   * field the request carries (`fields` without a before-value: sent unchanged, as a deal's
   * required name) still holds the value sent (carriedValues). A field that already holds the
   * value the row sends counts as holding (named in `already`): an earlier attempt of this row
   * may have been applied. CRM errors of the list read propagate (the worker's verdict decides).
   * `runId`: the run's first check in this process reads the list anew (#runStart), so a read
   * from before the apply — of an earlier run's writes — never passes for drift.
   * `at.place`: where the plan saw the record. Unless a whole-list read is fresh, the check reads
   * that one page (#page); a record no longer there (records before it deleted, the list
   * reordered) is looked up in a whole-list read, as is every record without a place.
   */
  async check(
    runId: string,
    resource: ListResource,
    id: string,
    expect: Readonly<Record<string, string>>,
    fields: Readonly<Record<string, unknown>>,
    at: CheckAt = {},
  ): Promise<DriftAnswer> {
    const carried = carriedValues(resource, expect, fields);
    if (Object.keys(expect).length === 0 && carried.size === 0) return { kind: 'holds' };
    const notBefore = this.#runStart(runId);
    let record: IndexedRecord | undefined;
    if (at.place !== undefined && this.#stale(this.#snaps.get(resource), notBefore)) {
      const n = pageOfPlace(at.place, this.#pageSize);
      const read = this.#page(resource, n, notBefore);
      this.#readAhead(resource, at.place, n, notBefore);
      if (read) record = (await abortable(read, at.signal)).byId(id);
    }
    if (!record) record = (await abortable(this.#fresh(resource, notBefore), at.signal)).index.byId(id);
    if (!record)
      return {
        kind: 'drifted',
        message: `not sent: ${resource.slice(0, -1)} ${id} is no longer in the CRM's list (it was when planned)`,
      };
    const changed: DriftedField[] = [];
    const already: string[] = [];
    for (const [field, before] of Object.entries(expect)) {
      const now = record.values[field] ?? '';
      // As the CRM tells values apart: an address a person re-cased is the same address.
      if (sameCanonical(field, now, before)) continue;
      if (fields[field] !== undefined && sameCanonical(field, now, canonicalFromRow(field, fields[field]))) {
        already.push(field);
        continue;
      }
      changed.push({ field, now, planned: before });
    }
    for (const [field, sent] of carried) {
      const now = record.values[field] ?? '';
      if (!sameCanonical(field, now, sent)) changed.push({ field, now, planned: sent, carried: true });
    }
    if (changed.length === 0) return already.length > 0 ? { kind: 'holds', already } : { kind: 'holds' };
    const words = changed.map(
      (c) =>
        `${c.field} is now ${JSON.stringify(showCanonical(c.now))} in the CRM (planned ${c.carried ? 'unchanged at' : 'over'} ${JSON.stringify(showCanonical(c.planned))})`,
    );
    return { kind: 'drifted', message: `not sent: the record changed since the plan: ${words.join('; ')}`, changed };
  }

  /**
   * The record's canonical values (by comparable field) as a list pass read them, for what a
   * plain import's row writes over (RowResult.changes); undefined when the list does not hold
   * the record. The same passes as the drift check's, fresh for longer (`beforeMaxAgeMs`, or
   * BEFORE_PASS_SPACING × the pass's duration): a run's first read in this process still reads
   * the list anew, so an earlier run's writes are never missed. With `beforeBoards`, a pass
   * another worker process of the workspace shared serves too, when it began no earlier than
   * the first ask of the run's before-values in any process of the workspace (Redis clock) and
   * is fresh by the same rule (#beforeSnap); one under way elsewhere that will be is waited for.
   */
  async values(
    runId: string,
    resource: ListResource,
    id: string,
    signal?: AbortSignal,
  ): Promise<Readonly<Record<string, string>> | undefined> {
    const snap = await abortable(this.#before(runId, resource), signal);
    return snap.index.byId(id)?.values;
  }

  /**
   * As values, from a read already fresh for the run, without waiting (no promise, no timer:
   * most rows of a plain import find their record here); undefined when a read is needed.
   */
  freshValues(
    runId: string,
    resource: ListResource,
    id: string,
  ): { values: Readonly<Record<string, string>> | undefined } | undefined {
    const snap = this.#beforeSnap(resource, runId);
    return snap ? { values: snap.index.byId(id)?.values } : undefined;
  }

  /**
   * Whether a planned create (an upsert plan's) still has no deal in the CRM: none holds its
   * match key now (the plan said "create"; a plan made now would update that one), and no deal
   * equal to it in every field it sends — compared as the create lookup compares (sentValues:
   * names normalised, automation fields and unreported ones left out) — was made since the plan
   * and is unclaimed by the workspace's rows. With `until` (another create of the plan has its
   * name), only deals made before then count: that row's deal may be made meanwhile, its answer
   * still on the way. Only for a row that never sent its POST: a row with a create marker would
   * find its own deal (the duplicate-safe create resolves that one).
   */
  async checkCreate(
    fields: Readonly<Record<string, unknown>>,
    planned: PlannedCreate,
    signal?: AbortSignal,
  ): Promise<DriftAnswer> {
    const creates = this.#o.creates;
    if (!creates) throw new Error('DriftCheck: planned creates need the fence (options.creates)');
    const snap = await abortable(this.#fresh('deals', this.#runStart(planned.runId)), signal);
    const deals = snap.deals!;
    const eq = planned.match?.indexOf('=') ?? -1;
    const key = planned.match !== undefined && eq > 0 ? planned.match.slice(0, eq) : undefined;
    const keyValue = key !== undefined ? normaliseKey(key, planned.match!.slice(eq + 1)) : '';
    if (key !== undefined && keyValue !== '') {
      const held = deals.byKey.get(key)?.get(keyValue);
      if (held && held.length > 0)
        return {
          kind: 'drifted',
          message: `not sent: a deal with ${key} ${JSON.stringify(planned.match!.slice(eq + 1))} was made since the plan (it planned to create one): ${held.join(', ')}`,
        };
    }
    const wanted = sentValues(fields, creates.automationFields ?? []);
    const name = wanted.find(([f]) => f === 'name')?.[1];
    const candidates = name !== undefined ? (deals.byName.get(name) ?? []) : [...snap.index.all()].map((r) => r.id);
    const { from, to } = await this.#window(planned, creates.fence);
    const alike = candidates.filter((id) => {
      const created = snap.index.createdAt(id);
      if (created === undefined || !(created >= from && created < to)) return false;
      const record = snap.index.byId(id)!;
      return wanted.every(([f, v]) => (f === 'name' ? normaliseName(record.name) : record.values[f]) === v);
    });
    const claimed = await creates.fence.claimed(alike);
    const free = alike.filter((id) => !claimed.has(id));
    if (free.length === 0) return { kind: 'holds' };
    return {
      kind: 'drifted',
      message: `not sent: a deal like this one was made since the plan: ${free.slice(0, 5).join(', ')}${free.length > 5 ? ', …' : ''}`,
    };
  }

  /**
   * Creation times (the CRM's record clock) of deals made since the plan (and before `until`),
   * wide at the start (a deal that may be older still counts) and narrow at the end (one that
   * may be made after `until` does not): the calibrated record clock's lower bound, else the
   * `Date` header's offset less UNCALIBRATED_SLACK_MS.
   */
  async #window(planned: PlannedCreate, fence: Pick<RowFence, 'recordClock'>): Promise<{ from: number; to: number }> {
    const clock = await fence.recordClock();
    const earliest = (at: number) =>
      clock ? earliestStamp(at, clock) : at + (this.#o.client.crmClock().at - Date.now()) - UNCALIBRATED_SLACK_MS;
    return {
      from: earliest(planned.madeAt),
      to: planned.until !== undefined ? earliest(planned.until) : Number.POSITIVE_INFINITY,
    };
  }

  /**
   * When this process first checked a planned row of the run (its clock): the run's checks
   * read no list older than that, so a deal made before the apply is always seen, however
   * recent this process's last read was (it may be older than the plan itself).
   */
  #runStart(runId: string): number {
    let at = this.#runs.get(runId);
    if (at === undefined) {
      at = Date.now();
      this.#runs.set(runId, at);
      // Forgetting a run costs one more list read if its rows come back.
      for (const old of this.#runs.keys()) {
        if (this.#runs.size <= RUNS_REMEMBERED) break;
        this.#runs.delete(old);
      }
    }
    return at;
  }

  get #pageSize(): number {
    return this.#o.pageSize ?? DEFAULTS.client.pageSize;
  }

  /** Whether a read (begun at startedAt, taking durationMs) is too old for a check; `notBefore`: a read begun earlier is. */
  #stale(s: ReadTime | undefined, notBefore?: number, use: ReadUse = 'check'): boolean {
    if (s === undefined || (notBefore !== undefined && s.startedAt < notBefore)) return true;
    const { maxAgeMs, beforeMaxAgeMs = maxAgeMs } = this.#o;
    const fresh =
      use === 'before'
        ? Math.max(beforeMaxAgeMs, BEFORE_PASS_SPACING * s.durationMs)
        : Math.max(maxAgeMs, DRIFT_PASS_SPACING * s.durationMs);
    return Date.now() - s.startedAt > fresh;
  }

  /**
   * Page `n` of the list, read for a check at most once while fresh (rows asking together share
   * the read). Undefined when this process read DRIFT_PAGE_READ_SHARE of the list's pages page by
   * page in the last drift window (`maxAgeMs`): one whole-list read serves the rest then.
   */
  #page(resource: ListResource, n: number, notBefore: number): Promise<RecordIndex> | undefined {
    let reads = this.#pageReads.get(resource);
    if (!reads) this.#pageReads.set(resource, (reads = new Map()));
    const last = reads.get(n);
    // A read still on its way is fresh when it began after notBefore: its age starts at its answer.
    if (last && (last.answered === undefined ? last.startedAt >= notBefore : !this.#stale(last.answered, notBefore)))
      return last.done;
    const now = Date.now();
    let times = this.#pageTimes.get(resource);
    if (!times) this.#pageTimes.set(resource, (times = []));
    while (times.length > 0 && times[0]! < now - this.#o.maxAgeMs) times.shift();
    const total = this.#totalPages.get(resource);
    if (total !== undefined && times.length >= Math.max(1, DRIFT_PAGE_READ_SHARE * total)) return undefined;
    times.push(now);
    const read: PageRead = { startedAt: now, done: this.#readPage(resource, n) };
    read.done.then(
      () => (read.answered = { startedAt: now, durationMs: Date.now() - now }),
      () => reads.get(n) === read && reads.delete(n), // a failed read is not kept: the next check tries again
    );
    // In the order read, so the oldest are dropped first once stale.
    reads.delete(n);
    reads.set(n, read);
    for (const [k, r] of reads) {
      if (r.answered === undefined || !this.#stale(r.answered)) break;
      reads.delete(k);
    }
    return read.done;
  }

  /** Starts reading page n + 1 for a row DRIFT_READ_AHEAD_FROM into page n (its failure is the next check's). */
  #readAhead(resource: ListResource, place: number, n: number, notBefore: number): void {
    const total = this.#totalPages.get(resource);
    if (total === undefined || n + 1 > total) return;
    if (place % this.#pageSize < DRIFT_READ_AHEAD_FROM * this.#pageSize) return;
    this.#page(resource, n + 1, notBefore)?.catch(() => undefined);
  }

  async #readPage(resource: ListResource, n: number): Promise<RecordIndex> {
    const { budget } = this.#o;
    const index = new RecordIndex(resource, 'id');
    const pages = this.#o.client.pages(resource, {
      pageSize: this.#pageSize,
      startPage: n,
      beforeFetch: () => budget.take(),
    });
    for await (const page of pages) {
      for (const record of page.records) index.add(record);
      this.#totalPages.set(resource, page.pagination.total_pages);
      break;
    }
    index.pages = 1;
    this.stats.pageReads++;
    this.stats.pages++;
    return index;
  }

  /** `notBefore`: a read begun earlier is stale (this process's clock). */
  #fresh(resource: ListResource, notBefore?: number, use: ReadUse = 'check'): Promise<Snapshot> {
    return this.#turn(resource, async () => {
      const last = this.#snaps.get(resource);
      if (!this.#stale(last, notBefore, use)) return last!;
      const snap = await this.#pass(resource);
      this.#snaps.set(resource, snap);
      return snap;
    });
  }

  /** One whole-list read at a time per resource in this process: rows asking together wait for the same one. */
  #turn(resource: ListResource, take: () => Promise<Snapshot>): Promise<Snapshot> {
    const tail = this.#tails.get(resource) ?? Promise.resolve(undefined);
    const turn = tail.catch(() => undefined).then(take);
    this.#tails.set(resource, turn);
    return turn;
  }

  /**
   * A snapshot that may serve the run's before-values now (#stale's 'before' rule): this
   * process's own last read, begun after its first ask for the run; or a pass agreed on the
   * workspace's board (its own or one another process shared), begun no earlier than the
   * run's first ask anywhere in the workspace (Redis clock, SharedBeforePasses.stampRun).
   */
  #beforeSnap(resource: ListResource, runId: string): Snapshot | undefined {
    const own = this.#snaps.get(resource);
    if (!this.#stale(own, this.#runStart(runId), 'before')) return own;
    return this.#sharedPasses.serving(resource, runId);
  }

  /**
   * A pass for the run's before-values: without boards, this process's own (#fresh). With them,
   * a fresh shared one, else the one the board grants this process (shared when done), else one
   * under way elsewhere that will serve the run; a board that cannot answer (Redis failing)
   * or a pass under way that will not serve (begun before the run's first ask) leaves this
   * process to read the list on its own, unshared, as without boards.
   */
  #before(runId: string, resource: ListResource): Promise<Snapshot> {
    const board = this.#sharedPasses.board(resource);
    if (!board) return this.#fresh(resource, this.#runStart(runId), 'before');
    this.#runStart(runId);
    const stamped = this.#sharedPasses.stampRun(runId, board);
    return this.#turn(resource, async () => {
      await stamped;
      const usable = this.#beforeSnap(resource, runId);
      if (usable) return usable;
      const shared = await this.#sharedPasses.forRun(resource, board, runId);
      if (shared !== undefined) return shared;
      const snap = await this.#pass(resource);
      this.#snaps.set(resource, snap);
      return snap;
    });
  }

  async #pass(resource: ListResource): Promise<Snapshot> {
    const startedAt = Date.now();
    const { budget } = this.#o;
    const index = new RecordIndex(resource, 'id', { keepCreatedAt: resource === 'deals' });
    const deals: DealKeys | undefined =
      resource === 'deals'
        ? {
            byKey: new Map(MATCH_KEYS.deals.map((k) => [k, new Map<string, string[]>()])),
            byName: new Map(),
          }
        : undefined;
    const pages = this.#o.client.pages(resource, {
      pageSize: this.#pageSize,
      beforeFetch: () => budget.take(),
    });
    for await (const page of pages) {
      index.pages += 1;
      this.#totalPages.set(resource, page.pagination.total_pages);
      for (const record of page.records) {
        index.add(record);
        if (!deals) continue;
        for (const [k, ids] of deals.byKey)
          push(ids, normaliseKey(k, (record as Record<string, unknown>)[k]), record.id);
        push(deals.byName, normaliseName(String((record as Record<string, unknown>).name ?? '')), record.id);
      }
    }
    this.stats.passes++;
    this.stats.pages += index.pages;
    const durationMs = Date.now() - startedAt;
    (this.#o.logger ?? silentLogger).debug(
      { resource, records: index.size, pages: index.pages, ms: durationMs },
      'drift check: list read',
    );
    return { startedAt, durationMs, index, ...(deals ? { deals } : {}) };
  }
}

/**
 * The fields a planned update sends with no before-value to hold it to (canonical, by field):
 * fields it sends unchanged, as a deal's required name. The plan found the record holding the
 * value sent, so the record must still hold it: sending it over a value a person wrote since
 * would put theirs back without a trace (the write changes nothing the result could record). A
 * field the CRM does not report (`position`) cannot be checked, and is a change, not carried.
 */
function carriedValues(
  resource: ListResource,
  expect: Readonly<Record<string, string>>,
  fields: Readonly<Record<string, unknown>>,
): Map<string, string> {
  const comparable: readonly string[] = COMPARABLE_FIELDS[resource];
  const out = new Map<string, string>();
  for (const [field, value] of Object.entries(fields))
    if (value !== undefined && field !== 'id' && !Object.hasOwn(expect, field) && comparable.includes(field))
      out.set(field, canonicalFromRow(field, value));
  return out;
}

function push(map: Map<string, string[]>, key: string, id: string): void {
  if (key === '') return;
  const held = map.get(key);
  if (held) held.push(id);
  else map.set(key, [id]);
}
