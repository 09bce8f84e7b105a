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

/** Names as a CRM may store them: Unicode-normalised, whitespace collapsed, case folded. */
export function normaliseName(name: string): string {
  return name.normalize('NFC').trim().replace(/\s+/g, ' ').toLowerCase();
}

/**
 * Finds deals an uncertain create may have made. The list has no filter and no promised
 * order, so finding one deal means reading every page; instead of one such pass per uncertain
 * create, every create that asks while a pass is queued shares the next one (at most one pass
 * runs at a time in a process), so a burst of lost answers costs a pass, not a pass each.
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
  /** Passes and list pages read, for logs and benchmarks. */
  readonly stats = { passes: 0, pages: 0 };

  constructor(options: DealLookupOptions) {
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
  }

  /** Unclaimed deals that match, oldest first. CRM errors propagate (the caller retries later). */
  async find(fields: DealCreateFields, marker: CreateMarker, signal?: AbortSignal): Promise<string[]> {
    const slack = marker.measured ? (this.#o.measuredSlackMs ?? 3000) : (this.#o.unmeasuredSlackMs ?? 120_000);
    const from = marker.crmClockAt - slack;
    const deals = await abortable(this.#join(from), signal);
    const name = normaliseName(fields.name);
    const value = fields.value === undefined ? undefined : canonicalFromRow('value', fields.value);
    const ids = deals
      .filter((d) => d.createdAt >= from && d.name === name && (value === undefined || d.value === value))
      .sort((a, b) => a.createdAt - b.createdAt)
      .map((d) => d.id);
    const claimed = await this.#o.fence.claimed(ids);
    return ids.filter((id) => !claimed.has(id));
  }

  /** One one-record page, so the client learns the CRM's clock from its Date header. */
  async measureClock(): Promise<void> {
    await this.#o.limiter?.take();
    await this.#o.client.listPage('deals', { pageNumber: 1, pageSize: 1 });
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
