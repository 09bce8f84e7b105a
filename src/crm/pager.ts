import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULTS, resolveSettings, type Resolved } from '../config/index.js';
import type { Logger } from '../log/index.js';
import { RateLimitedError, TransientError } from './errors.js';
import type { ListPage } from './records.js';

export interface PagerOptions {
  /** Records per page. Default DEFAULTS.client.pageSize (docs/architecture.md: lists are paged with up to 100). */
  pageSize?: number;
  /** First page_number to fetch. Default FIRST_PAGE. */
  startPage?: number;
  /** List version. Default: the client's `listVersion` (itself default 'v2'). */
  version?: 'v1' | 'v2';
  /** Retries of one page after TransientError. Default DEFAULTS.client.pageRetries. */
  maxRetries?: number;
  /** Waits of one page after 429; counted apart because a busy workspace is not a failure. Default DEFAULTS.client.pageRateLimitRetries. */
  maxRateLimitRetries?: number;
  /** First backoff delay after a TransientError, doubled each retry (with jitter; ms). Default DEFAULTS.client.pageRetryBaseDelayMs. */
  retryBaseDelayMs?: number;
  /** Longest backoff delay (ms). Default DEFAULTS.client.pageRetryMaxDelayMs. */
  retryMaxDelayMs?: number;
  /** Stops paging (also during a wait); the iterator throws the signal's reason. Default none. */
  signal?: AbortSignal;
  /**
   * Pages asked past the count an answer gave (`total_pages`) while full pages keep coming: a
   * count that is short is read by the spec's rule (the end is an empty page), within this
   * bound. Default DEFAULTS.client.pagesPastCount.
   */
  maxPagesPastCount?: number;
  /** Called with each page as yielded (records already deduplicated). Default none. */
  onPage?: (page: ListPage<unknown>) => void;
  /**
   * Awaited before every page request, retries included: a shared rate budget takes its token
   * here, so paging never outruns the limit the workers keep. Default none.
   */
  beforeFetch?: () => Promise<unknown>;
}

/** Used when a 429 carries no readable Retry-After: the same wait a worker pauses for. */
export const DEFAULT_RATE_LIMIT_WAIT_MS = DEFAULTS.worker.rateLimitPauseMs;

/** The list API numbers its pages from 1 (spec §8.1): where a pass starts unless told otherwise. */
export const FIRST_PAGE = 1;

type ResolvedPagerOptions = Resolved<
  PagerOptions,
  | 'pageSize'
  | 'startPage'
  | 'maxRetries'
  | 'maxRateLimitRetries'
  | 'retryBaseDelayMs'
  | 'retryMaxDelayMs'
  | 'maxPagesPastCount'
>;

export type FetchPage<T> = (pageNumber: number, pageSize: number) => Promise<ListPage<T>>;

interface PaginateContext {
  logger: Logger;
  /** For log lines only. */
  label: string;
}

/**
 * Follows page_number from startPage to the end of the list (docs/architecture.md, "Paging"):
 *
 * - an empty page ends it (spec §8.1 rule 2: how clients detect the end);
 * - so does a page at or past the count its own answer gives (`pagination.total_pages`) that is
 *   not full: no page can follow a short one, so a list whose last page is short takes exactly
 *   its pages. A full page there cannot tell: the pager asks on, until an empty page, for at
 *   most `maxPagesPastCount` pages past the count (a count that is short, read as the spec's
 *   rule says; the bound ends a list that never ends, with a warning);
 * - a page that brings no record not seen before in this pass ends it, with a warning naming
 *   the page: a CRM repeating its pages (whatever count it claims) would be paged for ever.
 *
 * Each answer's count is read anew: records appended while paging raise it, and the pager
 * follows them to the new end. A record seen twice (rows moving between pages) is yielded once:
 * ids of this pass are kept in a Set.
 */
export async function* paginate<T extends { id: string }>(
  fetchPage: FetchPage<T>,
  pagerOptions: PagerOptions,
  ctx: PaginateContext,
): AsyncGenerator<ListPage<T>, void, undefined> {
  const c = DEFAULTS.client;
  const options = resolveSettings(pagerOptions, {
    pageSize: c.pageSize,
    startPage: FIRST_PAGE,
    maxRetries: c.pageRetries,
    maxRateLimitRetries: c.pageRateLimitRetries,
    retryBaseDelayMs: c.pageRetryBaseDelayMs,
    retryMaxDelayMs: c.pageRetryMaxDelayMs,
    maxPagesPastCount: c.pagesPastCount,
  });
  const { pageSize } = options;
  const seen = new Set<string>();
  for (let pageNumber = options.startPage; ; pageNumber++) {
    const page = await fetchWithRetry(() => fetchPage(pageNumber, pageSize), pageNumber, options, ctx);
    if (page.records.length === 0) return;
    const fresh = page.records.filter((r) => !seen.has(r.id) && (seen.add(r.id), true));
    if (fresh.length === 0) {
      ctx.logger.warn(
        { list: ctx.label, page: pageNumber, records: page.records.length, totalPages: page.pagination.total_pages },
        `list ${ctx.label}: page ${pageNumber} brought no record not seen before in this pass (the CRM repeats its pages); the pass ends there`,
      );
      return;
    }
    const out: ListPage<T> = { records: fresh, pagination: page.pagination };
    options.onPage?.(out);
    yield out;
    const end = pageEnd(page, pageNumber, pageSize, options.maxPagesPastCount);
    if (end === 'last') return;
    if (end === 'bound') {
      ctx.logger.warn(
        { list: ctx.label, page: pageNumber, totalPages: page.pagination.total_pages },
        `list ${ctx.label}: page ${pageNumber} is ${options.maxPagesPastCount} past the count of ${page.pagination.total_pages} pages its answer gives, and pages are still full; the pass ends there (the list may hold more)`,
      );
      return;
    }
  }
}

/**
 * Whether page `pageNumber`'s answer ends the pass: `last` when it is at or past its count and
 * short (fewer records than a page holds), `bound` when full pages go on too far past the count.
 */
export function pageEnd(
  page: Pick<ListPage<unknown>, 'records' | 'pagination'>,
  pageNumber: number,
  pageSize: number,
  maxPagesPastCount: number,
): 'last' | 'bound' | 'more' {
  const { total_pages: count, page_size: answered } = page.pagination;
  if (pageNumber < count) return 'more';
  // A CRM that holds pages smaller than asked says so in page_size.
  const full = page.records.length >= (answered > 0 ? Math.min(pageSize, answered) : pageSize);
  if (!full) return 'last';
  return pageNumber - count >= maxPagesPastCount ? 'bound' : 'more';
}

async function fetchWithRetry<T>(
  fetch: () => Promise<ListPage<T>>,
  pageNumber: number,
  options: ResolvedPagerOptions,
  ctx: PaginateContext,
): Promise<ListPage<T>> {
  const { maxRetries, maxRateLimitRetries } = options;
  const base = options.retryBaseDelayMs;
  const cap = options.retryMaxDelayMs;
  let transient = 0;
  let limited = 0;
  for (;;) {
    options.signal?.throwIfAborted();
    try {
      await options.beforeFetch?.();
      return await fetch();
    } catch (err) {
      let delay: number;
      if (err instanceof RateLimitedError && limited < maxRateLimitRetries) {
        limited++;
        delay = err.retryAfterMs ?? DEFAULT_RATE_LIMIT_WAIT_MS;
      } else if (err instanceof TransientError && transient < maxRetries) {
        transient++;
        // "Equal jitter": at least half the exponential step, so retries stay spaced out.
        const step = Math.min(cap, base * 2 ** (transient - 1));
        delay = step / 2 + Math.random() * (step / 2);
      } else {
        throw err;
      }
      ctx.logger.warn(
        {
          list: ctx.label,
          page: pageNumber,
          code: (err as RateLimitedError | TransientError).code,
          delayMs: Math.round(delay),
        },
        'list page failed, retrying',
      );
      await sleep(delay, undefined, options.signal ? { signal: options.signal } : undefined).catch((e: unknown) => {
        // Surface the caller's abort reason, not the timers' AbortError wrapper.
        options.signal?.throwIfAborted();
        throw e;
      });
    }
  }
}
