import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { z } from 'zod';
import type { CrmClient, DealCreateFields } from '../../crm/index.js';
import { silentLogger, type Logger } from '../../log/index.js';
import {
  RECORD_CLOCK_DRIFT,
  earliestStamp,
  type CreateMarker,
  MAX_SHARED_SNAPSHOT_BYTES,
  type LookupPassBoard,
  type RecordClock,
  type RowFence,
} from '../../runs/index.js';
import { COMPARABLE_FIELDS, canonicalFromRecord, canonicalFromRow, normaliseName } from '../../reconcile/index.js';
import { abortable } from '../abortable.js';

export interface DealLookupOptions {
  client: CrmClient;
  /** Tells which deals some row already recorded (claims are workspace-wide), and the CRM's record clock. */
  fence: Pick<RowFence, 'claimed' | 'recordClock'>;
  /** Where the workspace's processes share passes and their last snapshot. */
  board: LookupPassBoard;
  /** Shared rate budget: every list page takes a token first. Default: none. */
  limiter?: { take(): Promise<unknown> };
  /** Records per page. */
  pageSize: number;
  /**
   * Fields the CRM's automation may set on a new deal (the workspace's `automationFields`): a
   * deal may differ from the row there and still be its own. Default none.
   */
  automationFields?: readonly string[];
  /**
   * Least time between the end of one pass and the start of the next, workspace-wide (the
   * create settle time is the natural choice; ms). A pass never takes more than a fifth of the
   * time either: the gap is at least PASS_GAP_FACTOR × the last pass's duration.
   */
  minGapMs: number;
  logger?: Logger;
}

/** What a pass keeps of a deal: enough to match, nothing more (passes can be large). */
interface DealEntry {
  id: string;
  createdAt: number;
  /** Canonical values in DEAL_FIELDS order, the name normalised. */
  values: string[];
}

/** The fields a deal is matched on: every comparable one (`position` is never reported). */
const DEAL_FIELDS: readonly string[] = COMPARABLE_FIELDS.deals;

/** A finished pass: what it saw, from when it began (Redis clock) and down to which creation time. */
interface Snapshot {
  startedAt: number;
  from: number;
  deals: DealEntry[];
}

export type LookupAnswer =
  /**
   * Unclaimed deals equal to the row in every field it sent, oldest first: `ids` created after
   * the row's send on the CRM's calibrated record clock, `doubtful` inside its uncertainty (or
   * any, when the clock is unknown or the marker's send time is only a bound): maybe earlier.
   */
  | { kind: 'found'; ids: string[]; doubtful: string[] }
  /** No pass can answer yet (one is under way elsewhere, or the next may not start): come back then. */
  | { kind: 'wait'; ms: number };

/** The gap after a pass is at least this many times its duration: passes take ≤ 1/5 of the time. */
const PASS_GAP_FACTOR = 4;
/** After a pass failed (CRM errors), the next may start this soon. */
const FAILED_PASS_GAP_MS = 2000;
/** A waiter whose pass is under way elsewhere looks again this often at most. */
const BUSY_RECHECK_MS = 3000;

/**
 * Finds deals an uncertain create may have made (docs/architecture.md, "Creates"). The list has
 * no filter and no promised order, so finding one deal means reading every page. A pass is
 * therefore a workspace-wide event: the worker processes agree through Redis (LookupPassBoard)
 * on who runs the next pass and when, its deals become a snapshot every process reads, and the
 * snapshot answers every create whose deal, if it was made at all, was made before the pass
 * began (its settle time had passed). Creates that no snapshot can answer yet wait for the next
 * pass without spending an attempt, and passes are spaced (`minGapMs`, and never more than a
 * fifth of the time), so a run pages the list a bounded number of times however many of its
 * creates are in doubt. A deal matches when it equals the row in every field the row sent (names
 * as the CRM normalises them; fields the workspace says automation sets are not compared) and no
 * row of the workspace claimed it; it is the row's own only when it was made after the row's
 * send on the CRM's record clock calibrated from answered creates (sendWindow), and in doubt
 * when it falls inside that clock's uncertainty.
 */
export class DealLookup {
  readonly #o: DealLookupOptions;
  readonly #logger: Logger;
  readonly #token = randomBytes(8).toString('hex');
  #last: Snapshot | undefined;
  /** The refresh under way in this process: the next waits for it. */
  #tail: Promise<unknown> = Promise.resolve();
  /** Passes run by this process, list pages it read, shared snapshots it loaded: for logs and benchmarks. */
  readonly stats = { passes: 0, pages: 0, sharedLoads: 0 };

  constructor(options: DealLookupOptions) {
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
  }

  /**
   * What of a row's fields the lookup tells deals apart by: those the CRM reports, less those
   * its automation may set. Creates meet on these (createFingerprint), so two rows the lookup
   * cannot tell apart are never in doubt at the same time.
   */
  comparable(fields: Readonly<Record<string, unknown>>): Record<string, unknown> {
    const ignored = new Set(this.#o.automationFields ?? []);
    return Object.fromEntries(Object.entries(fields).filter(([k]) => DEAL_FIELDS.includes(k) && !ignored.has(k)));
  }

  /**
   * `settledAt` (Redis clock): by then the create, if applied at all, was applied (its send plus
   * the settle time); a pass begun after it can answer. CRM errors propagate (the caller retries).
   */
  async find(
    fields: DealCreateFields,
    marker: CreateMarker,
    settledAt: number,
    signal?: AbortSignal,
  ): Promise<LookupAnswer> {
    const { from, after } = sendWindow(marker, await this.#o.fence.recordClock());
    const fits = (s: Snapshot | undefined): s is Snapshot =>
      s !== undefined && s.startedAt >= settledAt && s.from <= from;
    let snap = this.#last;
    if (!fits(snap)) {
      const got = await abortable(this.#refresh(from, fits), signal);
      if (typeof got === 'number') return { kind: 'wait', ms: got };
      snap = got;
    }
    const equal = sentMatcher(fields, this.#o.automationFields ?? []);
    const alike = snap.deals.filter((d) => d.createdAt >= from && equal(d)).sort((a, b) => a.createdAt - b.createdAt);
    const claimed = await this.#o.fence.claimed(alike.map((d) => d.id));
    const free = alike.filter((d) => !claimed.has(d.id));
    return {
      kind: 'found',
      ids: free.filter((d) => d.createdAt > after).map((d) => d.id),
      doubtful: free.filter((d) => d.createdAt <= after).map((d) => d.id),
    };
  }

  /**
   * Brings this process's snapshot up to what `fits` needs: the workspace's shared one, or a pass
   * of its own when the board grants one; else how long to wait. One at a time in a process, so
   * creates asking together share what the first finds, and a pass runs to its end whatever
   * happens to the job that started it.
   */
  #refresh(from: number, fits: (s: Snapshot | undefined) => s is Snapshot): Promise<Snapshot | number> {
    const turn = this.#tail.then(async () => {
      if (fits(this.#last)) return this.#last;
      await this.#loadShared();
      if (fits(this.#last)) return this.#last;
      const t = await this.#o.board.ask(from, this.#token);
      if (t.kind === 'wait') return t.ms;
      const own = await this.#pass(t.from, t.startedAt);
      return fits(own) ? own : BUSY_RECHECK_MS;
    });
    this.#tail = turn.catch(() => undefined);
    return turn;
  }

  async #loadShared(): Promise<void> {
    const meta = await this.#o.board.snapshotMeta();
    if (!meta || (this.#last && meta.startedAt <= this.#last.startedAt)) return;
    const body = await this.#o.board.snapshotBody();
    if (!body) return;
    const snap = decodeSnapshot(await gunzipAsync(body));
    if (!snap) return;
    if (!this.#last || snap.startedAt > this.#last.startedAt) this.#last = snap;
    this.stats.sharedLoads++;
  }

  async #pass(from: number, startedAt: number): Promise<Snapshot> {
    const { board, limiter } = this.#o;
    this.stats.passes++;
    const began = Date.now();
    const deals: DealEntry[] = [];
    // The lease is renewed on a timer while the pass runs, however slow a page is, so it only
    // runs out for a process that died: the others wait at most one short lease for its pass.
    const renewing = setInterval(() => {
      board.renew(this.#token).then(
        (held) => held || this.#logger.warn('a deal lookup pass outlived its lease; another process runs the next'),
        () => undefined,
      );
    }, board.leaseMs / 3);
    try {
      const pages = this.#o.client.pages('deals', {
        pageSize: this.#o.pageSize,
        ...(limiter ? { beforeFetch: () => limiter.take() } : {}),
      });
      for await (const page of pages) {
        this.stats.pages++;
        for (const d of page.records) {
          const createdAt = Date.parse(d.created_at);
          if (createdAt >= from)
            deals.push({
              id: d.id,
              createdAt,
              values: DEAL_FIELDS.map((f) => (f === 'name' ? normaliseName(d.name) : canonicalFromRecord(f, d))),
            });
        }
      }
    } catch (err) {
      clearInterval(renewing);
      await board.finish(this.#token, FAILED_PASS_GAP_MS, undefined).catch(() => undefined);
      throw err;
    }
    clearInterval(renewing);
    const snap: Snapshot = { startedAt, from, deals };
    const body = await gzipAsync(encodeSnapshot(snap));
    const shared = body.length <= MAX_SHARED_SNAPSHOT_BYTES;
    if (!shared)
      this.#logger.warn(
        { bytes: body.length, deals: deals.length },
        'deal lookup snapshot too large to share: other processes run their own passes',
      );
    const gap = Math.max(this.#o.minGapMs, PASS_GAP_FACTOR * (Date.now() - began));
    await board.finish(this.#token, gap, shared ? body : undefined);
    if (!this.#last || startedAt > this.#last.startedAt) this.#last = snap;
    this.#logger.debug(
      { passes: this.stats.passes, pages: this.stats.pages, candidates: deals.length, nextInMs: gap },
      'deal lookup pass done',
    );
    return snap;
  }
}

function encodeSnapshot(s: Snapshot): string {
  return JSON.stringify({
    startedAt: s.startedAt,
    from: s.from,
    fields: DEAL_FIELDS,
    deals: s.deals.map((d) => [d.id, d.createdAt, d.values]),
  });
}

const snapshotSchema = z.object({
  startedAt: z.number(),
  from: z.number(),
  fields: z.array(z.string()),
  deals: z.array(z.tuple([z.string(), z.number(), z.array(z.string())])),
});

/** A snapshot of another version (other fields kept) is not used: this process runs its own pass. */
function decodeSnapshot(raw: Buffer): Snapshot | undefined {
  const parsed = snapshotSchema.safeParse(JSON.parse(raw.toString('utf8')));
  if (!parsed.success || parsed.data.fields.join() !== DEAL_FIELDS.join()) return undefined;
  const s = parsed.data;
  return {
    startedAt: s.startedAt,
    from: s.from,
    deals: s.deals.map(([id, createdAt, values]) => ({ id, createdAt, values })),
  };
}

/**
 * Which creation times (CRM record clock, ms) could be the row's own deal's, and after which one
 * a deal was surely made after the row's send. The record clock is Redis' shifted by some o in
 * [lo, hi] (calibrated from answered creates); created_at may be truncated to its resolution.
 * A deal stamped before `earliestStamp(sentAt)` (the lower bound, less the resolution, the drift
 * and the spread of a CRM's stamps) was made before the send; one stamped c > sentAt + hi (plus
 * the drift) surely after it. With no calibration, or a marker whose sentAt is only a bound, no
 * deal is surely after the send, and (no calibration) none surely before.
 */
export function sendWindow(marker: CreateMarker, clock: RecordClock | undefined): { from: number; after: number } {
  if (!clock) return { from: 0, after: Number.POSITIVE_INFINITY };
  const drift = Math.floor(clock.ageMs * RECORD_CLOCK_DRIFT);
  const from = earliestStamp(marker.sentAt, clock, true);
  return { from, after: marker.exact ? marker.sentAt + clock.hi + drift : Number.POSITIVE_INFINITY };
}

/**
 * Equal to the row in every field it sent, as the CRM stores it: names normalised (spaces
 * collapsed, case folded), the rest canonical; fields the CRM's automation may set are not
 * compared, nor `position` (never reported).
 */
function sentMatcher(fields: DealCreateFields, automation: readonly string[]): (d: DealEntry) => boolean {
  const wanted = sentValues(fields, automation).map(([f, v]) => [DEAL_FIELDS.indexOf(f), v] as const);
  return (d) => wanted.every(([i, v]) => d.values[i] === v);
}

/**
 * What the lookup compares a deal with: the row's sent fields it can tell deals apart by
 * (DealLookup.comparable), each as the CRM stores it (names normalised), in DEAL_FIELDS order.
 * Apply's drift check of a planned create compares the same way (drift-check.ts).
 */
export function sentValues(
  fields: Readonly<Record<string, unknown>>,
  automation: readonly string[],
): Array<[field: string, canonical: string]> {
  const wanted: Array<[string, string]> = [];
  for (const f of DEAL_FIELDS) {
    const v = fields[f];
    if (v === undefined || automation.includes(f)) continue;
    wanted.push([f, f === 'name' ? normaliseName(String(v)) : canonicalFromRow(f, v)]);
  }
  return wanted;
}

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);
