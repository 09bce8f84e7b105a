import type { CrmClient, ListResource } from '../crm/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import { canonicalFromRow, RecordIndex, showCanonical } from '../reconcile/index.js';
import { abortable } from './abortable.js';

export interface DriftCheckOptions {
  client: CrmClient;
  /** The workspace's shared request budget: every list page takes a token (the drift pages are in the limit). */
  budget: { take(signal?: AbortSignal): Promise<unknown> };
  /**
   * A list read older than this is read again before a planned update is checked (the
   * workspace's `driftMaxAgeMs`); a pass is also spaced by PASS_SPACING × its own duration, so
   * list pages stay about a fifth of the budget at most.
   */
  maxAgeMs: number;
  pageSize?: number;
  logger?: Logger;
}

export type DriftAnswer = { kind: 'holds' } | { kind: 'drifted'; message: string };

/** A read is fresh for at least this many times its own duration. */
const PASS_SPACING = 4;

interface Snapshot {
  startedAt: number;
  durationMs: number;
  index: RecordIndex;
}

/**
 * Apply's drift check (docs/architecture.md, "Change control"): before a planned update is sent,
 * its record must still hold the plan's before-values of the fields it changes. The spec has no
 * GET by id, so the check reads the resource's list — one pass (list pages inside the workspace's
 * request budget) shared by every job of this process, refreshed once it is older than
 * `maxAgeMs` (or PASS_SPACING × its duration, whichever is longer). One pass at a time per
 * resource: rows asking together wait for the same one.
 *
 * What remains: a record edited after the pass that the row's check read began, and before the
 * row's request lands, is not seen — a window of at most the read's age (≤ max(maxAgeMs,
 * PASS_SPACING × pass duration) + the pass itself) plus the row's wait for its token.
 */
export class DriftCheck {
  readonly #o: DriftCheckOptions;
  readonly #snaps = new Map<ListResource, Snapshot>();
  readonly #tails = new Map<ListResource, Promise<Snapshot>>();
  /** Passes and list pages read by this process (logs, tests). */
  readonly stats = { passes: 0, pages: 0 };

  constructor(options: DriftCheckOptions) {
    this.#o = options;
  }

  /**
   * Whether record `id` still holds `expect` (canonical before-values by field). A field that
   * already holds the value the row sends counts as holding: an earlier attempt of this row may
   * have been applied. CRM errors of the list read propagate (the worker's verdict decides).
   */
  async check(
    resource: ListResource,
    id: string,
    expect: Readonly<Record<string, string>>,
    fields: Readonly<Record<string, unknown>>,
    signal?: AbortSignal,
  ): Promise<DriftAnswer> {
    if (Object.keys(expect).length === 0) return { kind: 'holds' };
    const snap = await abortable(this.#fresh(resource), signal);
    const record = snap.index.byId(id);
    if (!record)
      return {
        kind: 'drifted',
        message: `not sent: ${resource.slice(0, -1)} ${id} is no longer in the CRM's list (it was when planned)`,
      };
    const changed: string[] = [];
    for (const [field, before] of Object.entries(expect)) {
      const now = record.values[field] ?? '';
      if (now === before) continue;
      if (fields[field] !== undefined && now === canonicalFromRow(field, fields[field])) continue;
      changed.push(
        `${field} is now ${JSON.stringify(showCanonical(now))} in the CRM (planned over ${JSON.stringify(showCanonical(before))})`,
      );
    }
    if (changed.length === 0) return { kind: 'holds' };
    return { kind: 'drifted', message: `not sent: the record changed since the plan: ${changed.join('; ')}` };
  }

  #fresh(resource: ListResource): Promise<Snapshot> {
    const stale = (s: Snapshot | undefined) =>
      s === undefined || Date.now() - s.startedAt > Math.max(this.#o.maxAgeMs, PASS_SPACING * s.durationMs);
    const tail = this.#tails.get(resource) ?? Promise.resolve(undefined);
    const turn = tail
      .catch(() => undefined)
      .then(async () => {
        const last = this.#snaps.get(resource);
        if (!stale(last)) return last!;
        const snap = await this.#pass(resource);
        this.#snaps.set(resource, snap);
        return snap;
      });
    this.#tails.set(resource, turn);
    return turn;
  }

  async #pass(resource: ListResource): Promise<Snapshot> {
    const startedAt = Date.now();
    const { budget } = this.#o;
    const index = await RecordIndex.build(this.#o.client, {
      resource,
      matchKey: 'id',
      ...(this.#o.pageSize !== undefined ? { pageSize: this.#o.pageSize } : {}),
      beforeFetch: () => budget.take(),
    });
    this.stats.passes++;
    this.stats.pages += index.pages;
    const durationMs = Date.now() - startedAt;
    (this.#o.logger ?? silentLogger).debug(
      { resource, records: index.size, pages: index.pages, ms: durationMs },
      'drift check: list read',
    );
    return { startedAt, durationMs, index };
  }
}
