import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { z } from 'zod';
import type { CrmClient, DealCreateFields } from '../crm/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { CreateMarker, LookupPassBoard, RowFence } from '../runs/index.js';
import { canonicalFromRecord, canonicalFromRow } from './compare.js';

export interface DealLookupOptions {
  client: CrmClient;
  /** Tells which deals some row already recorded (claims are workspace-wide). */
  fence: Pick<RowFence, 'claimed'>;
  /** Where the workspace's processes share passes and their last snapshot. */
  board: LookupPassBoard;
  /** Shared rate budget: every list page takes a token first. Default: none. */
  limiter?: { take(): Promise<void> };
  /** Records per page. Default 100. */
  pageSize?: number;
  /** Slack before the row's send time, when the CRM's clock was measured (its Date header). Default 3000 ms. */
  measuredSlackMs?: number;
  /** Slack when it was not (our clock may be far off the CRM's). Default 120 000 ms. */
  unmeasuredSlackMs?: number;
  /**
   * Least time between the end of one pass and the start of the next, workspace-wide (the
   * create settle time is the natural choice). Default 30 000 ms. A pass never takes more than
   * a fifth of the time either: the gap is at least PASS_GAP_FACTOR × the last pass's duration.
   */
  minGapMs?: number;
  logger?: Logger;
}

/** What a pass keeps of a deal: enough to match, nothing more (passes can be large). */
interface DealEntry {
  id: string;
  name: string;
  value: string;
  createdAt: number;
}

/** A finished pass: what it saw, from when it began (Redis clock) and down to which creation time. */
interface Snapshot {
  startedAt: number;
  from: number;
  deals: DealEntry[];
}

export type LookupAnswer =
  /** Unclaimed deals that match, oldest first. */
  | { kind: 'found'; ids: string[] }
  /** No pass can answer yet (one is under way elsewhere, or the next may not start): come back then. */
  | { kind: 'wait'; ms: number };

/** The gap after a pass is at least this many times its duration: passes take ≤ 1/5 of the time. */
const PASS_GAP_FACTOR = 4;
/** After a pass failed (CRM errors), the next may start this soon. */
const FAILED_PASS_GAP_MS = 2000;
/** A waiter whose pass is under way elsewhere looks again this often at most. */
const BUSY_RECHECK_MS = 3000;
/** Larger snapshots are not shared (each process would pass on its own): Redis strings stay small. */
const MAX_SHARED_SNAPSHOT_BYTES = 32 * 1024 * 1024;

/** Names as a CRM may store them: Unicode-normalised, whitespace collapsed, case folded. */
export function normaliseName(name: string): string {
  return name.normalize('NFC').trim().replace(/\s+/g, ' ').toLowerCase();
}

/**
 * Finds deals an uncertain create may have made (docs/architecture.md, "Creates"). The list has
 * no filter and no promised order, so finding one deal means reading every page. A pass is
 * therefore a workspace-wide event: the worker processes agree through Redis (LookupPassBoard)
 * on who runs the next pass and when, its deals become a snapshot every process reads, and the
 * snapshot answers every create whose deal, if it was made at all, was made before the pass
 * began (its settle time had passed). Creates that no snapshot can answer yet wait for the next
 * pass without spending an attempt, and passes are spaced (`minGapMs`, and never more than a
 * fifth of the time), so a run pages the list a bounded number of times however many of its
 * creates are in doubt. Matching is deliberately loose where a CRM may change what it stored
 * (automation may set a status, stage or owner; names get normalised) and strict where it
 * cannot: the same normalised name, the same value when one was sent, created after this row's
 * own send by the CRM's clock, and claimed by no row of the workspace.
 */
export class DealLookup {
  readonly #o: DealLookupOptions;
  readonly #logger: Logger;
  readonly #token = randomBytes(8).toString('hex');
  #last: Snapshot | undefined;
  /** The refresh under way in this process: the next waits for it. */
  #tail: Promise<unknown> = Promise.resolve();
  #measuring: Promise<void> | undefined;
  /** Passes run by this process, list pages it read, shared snapshots it loaded: for logs and benchmarks. */
  readonly stats = { passes: 0, pages: 0, sharedLoads: 0 };

  constructor(options: DealLookupOptions) {
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
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
    const slack = marker.measured ? (this.#o.measuredSlackMs ?? 3000) : (this.#o.unmeasuredSlackMs ?? 120_000);
    const from = marker.crmClockAt - slack;
    const fits = (s: Snapshot | undefined): s is Snapshot =>
      s !== undefined && s.startedAt >= settledAt && s.from <= from;
    let snap = this.#last;
    if (!fits(snap)) {
      const got = await abortable(this.#refresh(from, fits), signal);
      if (typeof got === 'number') return { kind: 'wait', ms: got };
      snap = got;
    }
    const name = normaliseName(fields.name);
    const value = fields.value === undefined ? undefined : canonicalFromRow('value', fields.value);
    const ids = snap.deals
      .filter((d) => d.createdAt >= from && d.name === name && (value === undefined || d.value === value))
      .sort((a, b) => a.createdAt - b.createdAt)
      .map((d) => d.id);
    const claimed = await this.#o.fence.claimed(ids);
    return { kind: 'found', ids: ids.filter((id) => !claimed.has(id)) };
  }

  /** One one-record page, so the client learns the CRM's clock from its Date header (one at a time). */
  measureClock(): Promise<void> {
    this.#measuring ??= (async () => {
      await this.#o.limiter?.take();
      await this.#o.client.listPage('deals', { pageNumber: 1, pageSize: 1 });
    })().finally(() => (this.#measuring = undefined));
    return this.#measuring;
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
        pageSize: this.#o.pageSize ?? 100,
        ...(limiter ? { beforeFetch: () => limiter.take() } : {}),
      });
      for await (const page of pages) {
        this.stats.pages++;
        for (const d of page.records) {
          const createdAt = Date.parse(d.created_at);
          if (createdAt >= from)
            deals.push({ id: d.id, name: normaliseName(d.name), value: canonicalFromRecord('value', d), createdAt });
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
    const gap = Math.max(this.#o.minGapMs ?? 30_000, PASS_GAP_FACTOR * (Date.now() - began));
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
    deals: s.deals.map((d) => [d.id, d.name, d.value, d.createdAt]),
  });
}

const snapshotSchema = z.object({
  startedAt: z.number(),
  from: z.number(),
  deals: z.array(z.tuple([z.string(), z.string(), z.string(), z.number()])),
});

function decodeSnapshot(raw: Buffer): Snapshot {
  const s = snapshotSchema.parse(JSON.parse(raw.toString('utf8')));
  return {
    startedAt: s.startedAt,
    from: s.from,
    deals: s.deals.map(([id, name, value, createdAt]) => ({ id, name, value, createdAt })),
  };
}

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
