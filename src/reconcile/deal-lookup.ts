import type { CrmClient, DealCreateFields } from '../crm/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { CreateMarker, RowFence } from '../runs/index.js';
import { canonicalFromRecord, canonicalFromRow } from './compare.js';

export interface DealLookupOptions {
  client: CrmClient;
  /** Tells which deals some row already recorded (claims are workspace-wide). */
  fence: Pick<RowFence, 'claimed'>;
  /** Shared rate budget: every list page takes a token first. Default: none (adaptive mode). */
  limiter?: { take(): Promise<void> };
  /** Records per page. Default 100. */
  pageSize?: number;
  /** Slack before the row's send time, when the CRM's clock was measured (its Date header). Default 3000 ms. */
  measuredSlackMs?: number;
  /** Slack when it was not (our clock may be far off the CRM's). Default 120 000 ms. */
  unmeasuredSlackMs?: number;
  logger?: Logger;
}

/** What a pass keeps of a deal: enough to match, nothing more (passes can be large). */
interface DealEntry {
  id: string;
  name: string;
  value: string;
  createdAt: number;
}

interface PendingPass {
  /** The earliest creation time any waiter of this pass needs. */
  from: number;
  deals: Promise<DealEntry[]>;
}

/** A finished pass: what it saw, from when it began (our clock) and down to which creation time. */
interface Snapshot {
  startedAt: number;
  from: number;
  deals: DealEntry[];
}

/** Our clock and Redis's (markers' sentAt) may differ a little: a snapshot must be this much newer. */
const CLOCK_MARGIN_MS = 2000;

/** Names as a CRM may store them: Unicode-normalised, whitespace collapsed, case folded. */
export function normaliseName(name: string): string {
  return name.normalize('NFC').trim().replace(/\s+/g, ' ').toLowerCase();
}

/**
 * Finds deals an uncertain create may have made. The list has no filter and no promised
 * order, so finding one deal means reading every page; instead of one such pass per uncertain
 * create, every create that asks while a pass is queued shares the next one (at most one pass
 * runs at a time in a process), and the last finished pass answers every create whose deal, if
 * it was made at all, was made before that pass began (its settle time had passed): one pass
 * settles every create that was in doubt when it began, not only the few a worker holds.
 * Matching is deliberately loose where a CRM may change what it stored (automation may set a
 * status, stage or owner; names get normalised) and strict where it cannot: the same normalised
 * name, the same value when one was sent, created after this row's own send by the CRM's
 * clock, and claimed by no row of the workspace.
 */
export class DealLookup {
  readonly #o: DealLookupOptions;
  readonly #logger: Logger;
  #pending: PendingPass | undefined;
  #tail: Promise<unknown> = Promise.resolve();
  #last: Snapshot | undefined;
  #measuring: Promise<void> | undefined;
  /** Passes and list pages read, for logs and benchmarks. */
  readonly stats = { passes: 0, pages: 0 };

  constructor(options: DealLookupOptions) {
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
  }

  /**
   * Unclaimed deals that match, oldest first. `settledAt`: by then the create, if applied at all,
   * was applied (its send plus the settle time); a pass begun after it can answer. CRM errors
   * propagate (the caller retries later).
   */
  async find(fields: DealCreateFields, marker: CreateMarker, settledAt: number, signal?: AbortSignal): Promise<string[]> {
    const slack = marker.measured ? (this.#o.measuredSlackMs ?? 3000) : (this.#o.unmeasuredSlackMs ?? 120_000);
    const from = marker.crmClockAt - slack;
    const last = this.#last;
    const deals = last && last.startedAt >= settledAt + CLOCK_MARGIN_MS && last.from <= from ? last.deals : await abortable(this.#join(from), signal);
    const name = normaliseName(fields.name);
    const value = fields.value === undefined ? undefined : canonicalFromRow('value', fields.value);
    const ids = deals
      .filter((d) => d.createdAt >= from && d.name === name && (value === undefined || d.value === value))
      .sort((a, b) => a.createdAt - b.createdAt)
      .map((d) => d.id);
    const claimed = await this.#o.fence.claimed(ids);
    return ids.filter((id) => !claimed.has(id));
  }

  /** One one-record page, so the client learns the CRM's clock from its Date header (one at a time). */
  measureClock(): Promise<void> {
    this.#measuring ??= (async () => {
      await this.#o.limiter?.take();
      await this.#o.client.listPage('deals', { pageNumber: 1, pageSize: 1 });
    })().finally(() => (this.#measuring = undefined));
    return this.#measuring;
  }

  #join(from: number): Promise<DealEntry[]> {
    const queued = this.#pending;
    if (queued) {
      queued.from = Math.min(queued.from, from);
      return queued.deals;
    }
    const pass: PendingPass = { from, deals: Promise.resolve([]) };
    pass.deals = this.#tail.then(() => {
      // From here on the pass is under way: later askers queue for the next one.
      if (this.#pending === pass) this.#pending = undefined;
      return this.#pass(pass.from);
    });
    this.#tail = pass.deals.catch(() => undefined);
    this.#pending = pass;
    return pass.deals;
  }

  async #pass(from: number): Promise<DealEntry[]> {
    this.stats.passes++;
    const startedAt = Date.now();
    const deals: DealEntry[] = [];
    const limiter = this.#o.limiter;
    const pages = this.#o.client.pages('deals', { pageSize: this.#o.pageSize ?? 100, ...(limiter ? { beforeFetch: () => limiter.take() } : {}) });
    for await (const page of pages) {
      this.stats.pages++;
      for (const d of page.records) {
        const createdAt = Date.parse(d.created_at);
        if (createdAt >= from) deals.push({ id: d.id, name: normaliseName(d.name), value: canonicalFromRecord('value', d), createdAt });
      }
    }
    this.#logger.debug({ passes: this.stats.passes, pages: this.stats.pages, candidates: deals.length }, 'deal lookup pass done');
    if (!this.#last || startedAt > this.#last.startedAt) this.#last = { startedAt, from, deals };
    return deals;
  }
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
