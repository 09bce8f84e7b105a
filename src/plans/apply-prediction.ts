import { DEFAULTS } from '../config/index.js';
import { DRIFT_PAGE_READ_SHARE, DRIFT_PASS_SPACING, DRIFT_READ_AHEAD_FROM, pageOfPlace } from '../reconcile/light.js';
import type { PlanPrediction } from './plan-types.js';

/** What predictApply needs of the workspace: its known limit and the drift window. */
export interface PredictionSettings {
  pageSize?: number | undefined;
  settings: { driftMaxAgeMs: number; rateLimit?: { max: number; durationMs: number } | undefined };
}

/**
 * The plan's writes in row order, as apply's drift check will see them: an update with its
 * record's place in the list (it reads that page), or a write checked against the whole list
 * (a create, an update whose place is not known).
 */
export class ApplyReads {
  /** Per write in row order: the record's place, or -1 (the whole list). */
  readonly #places: number[] = [];

  write(place?: number): void {
    this.#places.push(place ?? -1);
  }

  get writes(): number {
    return this.#places.length;
  }

  places(): readonly number[] {
    return this.#places;
  }
}

/**
 * Requests and time at the workspace's known limit: one request per write, plus the list pages
 * the drift check reads, counted by running its rules (DriftCheck, src/worker/drift-check.ts)
 * over the writes in row order at the limit: a write with a place reads its page unless that
 * page or a whole-list read is fresh (max(driftMaxAgeMs, DRIFT_PASS_SPACING × the read's
 * duration)), and a whole-list read when it has no place or DRIFT_PAGE_READ_SHARE of the pages
 * were read one by one in the last window. Requests go out one after another at the limit (a
 * fleet's processes each keep their own reads: two processes may read a page once each). With
 * the limit unknown, reads never go stale: the least apply reads, and how long is not said.
 */
export function predictApply(
  writes: number | ApplyReads,
  records: number,
  options: PredictionSettings,
): PlanPrediction {
  const reads = typeof writes === 'number' ? wholeListWrites(writes) : writes;
  const pageSize = options.pageSize ?? DEFAULTS.client.pageSize;
  const pagesPerPass = Math.max(1, Math.ceil(records / pageSize));
  const limit = options.settings.rateLimit;
  const perSecond = limit ? (limit.max * 1000) / limit.durationMs : undefined;
  const listPages = countListPages(reads.places(), pagesPerPass, pageSize, {
    secondsPerRequest: perSecond ? 1 / perSecond : 0,
    windowSeconds: perSecond ? options.settings.driftMaxAgeMs / 1000 : Number.POSITIVE_INFINITY,
  });
  const requests = reads.writes + listPages;
  if (!limit || !perSecond) return { requests, writes: reads.writes, listPages, limit: 'unknown limit' };
  return {
    requests,
    writes: reads.writes,
    listPages,
    seconds: Math.ceil(requests / perSecond),
    limit: `${limit.max} requests per ${limit.durationMs / 1000} s`,
  };
}

function wholeListWrites(n: number): ApplyReads {
  const reads = new ApplyReads();
  for (let i = 0; i < n; i++) reads.write();
  return reads;
}

function countListPages(
  places: readonly number[],
  pagesPerPass: number,
  pageSize: number,
  clock: { secondsPerRequest: number; windowSeconds: number },
): number {
  const { secondsPerRequest: step, windowSeconds: window } = clock;
  let t = 0;
  let pages = 0;
  let whole: { at: number; seconds: number } | undefined;
  const pageAt = new Map<number, number>();
  const recent: number[] = [];
  const fresh = (at: number, seconds: number) => t - at <= Math.max(window, DRIFT_PASS_SPACING * seconds);
  const share = Math.max(1, DRIFT_PAGE_READ_SHARE * pagesPerPass);
  const pass = () => {
    whole = { at: t, seconds: pagesPerPass * step };
    pages += pagesPerPass;
    t += pagesPerPass * step;
  };
  for (const place of places) {
    if (whole === undefined || !fresh(whole.at, whole.seconds)) {
      if (place < 0) pass();
      else {
        const page = pageOfPlace(place, pageSize);
        // Its page, then the next one when the row is far enough into its page (DriftCheck#readAhead).
        const wanted =
          place % pageSize >= DRIFT_READ_AHEAD_FROM * pageSize && page < pagesPerPass ? [page, page + 1] : [page];
        for (const n of wanted) {
          const at = pageAt.get(n);
          if (at !== undefined && fresh(at, 0)) continue;
          while (recent.length > 0 && recent[0]! < t - window) recent.shift();
          if (recent.length >= share) {
            if (n === page) pass();
            break;
          }
          recent.push(t);
          pageAt.set(n, t);
          pages += 1;
          t += step;
        }
      }
    }
    t += step; // the write
  }
  return pages;
}
