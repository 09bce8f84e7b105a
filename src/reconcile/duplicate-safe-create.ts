import type { Redis } from 'ioredis';
import { BadResponseError, CrmError, TransientError, type CrmClient, type DealCreateFields } from '../crm/index.js';
import { silentLogger, type Logger } from '../log/index.js';
import type { RunStore } from '../runs/index.js';
import { packRecord, unpackRecord, diffFields } from './compare.js';

export interface FindCreatedDealOptions {
  /** Only deals created at or after this instant (ISO), less `skewMs`, can be ours. */
  since: string;
  /** Deals already recorded by other rows of the run. */
  claimed: ReadonlySet<string>;
  /** Tolerated clock difference between us and the CRM. Default 60 000 ms. */
  skewMs?: number;
  /** Records per list page. Default 100. */
  pageSize?: number;
}

/**
 * Deals an earlier, possibly committed attempt of `fields` may have created: same name and
 * every other sent field equal, created since the run began, not claimed by another row.
 * Oldest first. Pages the whole list: the spec promises no order to stop early on.
 */
export async function findPossiblyCreatedDeals(client: CrmClient, fields: DealCreateFields, options: FindCreatedDealOptions): Promise<string[]> {
  const since = Date.parse(options.since) - (options.skewMs ?? 60_000);
  const name = fields.name.trim();
  const found: Array<{ id: string; at: number }> = [];
  for await (const deal of client.records('deals', { pageSize: options.pageSize ?? 100 })) {
    if (deal.name.trim() !== name || options.claimed.has(deal.id)) continue;
    const at = Date.parse(deal.created_at);
    if (!(at >= since)) continue;
    const changes = diffFields('deals', fields, unpackRecord('deals', packRecord('deals', deal)), ['id', 'position']);
    if (changes.length === 0) found.push({ id: deal.id, at });
  }
  return found.sort((a, b) => a.at - b.at).map((d) => d.id);
}

/** The first possibly-created deal, or undefined (see findPossiblyCreatedDeals). */
export async function findPossiblyCreatedDeal(client: CrmClient, fields: DealCreateFields, options: FindCreatedDealOptions): Promise<string | undefined> {
  return (await findPossiblyCreatedDeals(client, fields, options))[0];
}

export interface DuplicateSafeCreateOptions {
  client: CrmClient;
  /** Connection used for the per-run set of claimed deal ids. */
  redis: Redis;
  /** Key prefix from the config. */
  prefix: string;
  /** To read the run's createdAt. */
  store: RunStore;
  /** See FindCreatedDealOptions. Default 60 000 ms. */
  skewMs?: number;
  /** Lifetime of a run's claimed set. Default 7 days. */
  claimTtlSeconds?: number;
  logger?: Logger;
}

/** Where a job stands: BullMQ's counters of the job being processed. */
export interface CreateAttempt {
  runId: string;
  row: number;
  /** Times the job was started, this one included (a crash mid-request shows as > 1). */
  attemptsStarted: number;
  /** Failed attempts so far. */
  attemptsMade: number;
}

/** An answer that says the POST was refused (4xx, or a connection that never carried it). */
function provesNotApplied(err: unknown): boolean {
  if (err instanceof TransientError) return !err.maybeCommitted;
  return err instanceof CrmError && err.status !== undefined && err.status >= 400 && err.status < 500;
}

export function claimedKey(prefix: string, runId: string): string {
  return `${prefix}:reconcile:claimed:${runId}`;
}

/** Set while a row's POST is on the wire; left behind only when it may have been applied. */
export function inFlightKey(prefix: string, runId: string, row: number): string {
  return `${prefix}:reconcile:creating:${runId}:${row}`;
}

/**
 * Creates a deal at most once per row. A POST that timed out or lost its connection may have
 * been applied, and so may one whose worker died mid-request. A marker is set before each POST
 * and removed once the answer proves the outcome (a deal, or a refusal such as 429 or 422); a
 * later attempt that still finds the marker looks for the deal it may have made and records
 * that one. Paging the whole deal list is costly, so only a real doubt pays for it: a job
 * merely requeued after a 429 does not. Every deal a row records is claimed in a per-run Redis
 * set, so two rows with the same fields never record the same deal.
 */
export class DuplicateSafeCreate {
  readonly #o: DuplicateSafeCreateOptions;
  readonly #logger: Logger;

  constructor(options: DuplicateSafeCreateOptions) {
    this.#o = options;
    this.#logger = options.logger ?? silentLogger;
  }

  async create(attempt: CreateAttempt, fields: DealCreateFields): Promise<string> {
    const { redis, prefix } = this.#o;
    const key = claimedKey(prefix, attempt.runId);
    const marker = inFlightKey(prefix, attempt.runId, attempt.row);
    const ttl = this.#o.claimTtlSeconds ?? 7 * 24 * 3600;
    // Checked on every attempt: a retry of the run (`runs retry`) is a new job that starts at 1.
    if ((await redis.exists(marker)) === 1) {
      const run = await this.#o.store.getRun(attempt.runId);
      const claimed = new Set(await redis.smembers(key));
      const candidates = await findPossiblyCreatedDeals(this.#o.client, fields, {
        since: run?.createdAt ?? new Date(0).toISOString(),
        claimed,
        ...(this.#o.skewMs !== undefined ? { skewMs: this.#o.skewMs } : {}),
      });
      for (const id of candidates) {
        if (await this.#claim(key, id)) {
          await redis.del(marker);
          this.#logger.info({ runId: attempt.runId, row: attempt.row, dealId: id }, 'create retried: the earlier attempt had created the deal; recording it');
          return id;
        }
      }
    }
    await redis.set(marker, '1', 'EX', ttl);
    let id: string;
    try {
      id = (await this.#o.client.createDeal(fields)).id;
    } catch (err) {
      if (err instanceof BadResponseError && err.recordId !== undefined) {
        // Created, but the answer is off-spec: the deal exists, so this row has made it.
        id = err.recordId;
      } else {
        if (provesNotApplied(err)) await redis.del(marker);
        throw err;
      }
    }
    if (!(await this.#claim(key, id))) {
      this.#logger.warn({ runId: attempt.runId, row: attempt.row, dealId: id }, 'a deal this row created was already claimed by another row');
    }
    await redis.del(marker);
    return id;
  }

  async #claim(key: string, id: string): Promise<boolean> {
    const replies = await this.#o.redis.multi().sadd(key, id).expire(key, this.#o.claimTtlSeconds ?? 7 * 24 * 3600).exec();
    return Number(replies?.[0]?.[1] ?? 0) === 1;
  }
}
