import type { RunKeys } from '../keys/index.js';
import type { RedisClient } from '../redis/index.js';
import { decodeRun } from './run-codec.js';
import type { RunRefs } from './run-refs.js';
import type { ListRunsQuery, RunRecord, RunStatus } from './run-types.js';

/** Rows or runs a page holds when the caller does not say. */
export const DEFAULT_PAGE = 50;

/** A page offset or size as given, or `fallback` when missing, negative or not a number. */
export function nonNegative(value: number | undefined, fallback: number): number {
  return value === undefined || !Number.isFinite(value) || value < 0 ? fallback : Math.floor(value);
}

/**
 * Pages of runs, newest first. Every filter is one sorted set of the workspace's slot, or a
 * merge across workspaces (status alone) or the small index of a sync definition: nothing
 * intersects keys of different slots, so listings work the same on a Redis Cluster
 * (docs/architecture.md, "Redis Cluster").
 */
export class RunListing {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RunKeys,
    private readonly refs: RunRefs,
  ) {}

  async list(query: ListRunsQuery = {}): Promise<{ runs: RunRecord[]; total: number }> {
    const offset = nonNegative(query.offset, 0);
    const limit = nonNegative(query.limit, DEFAULT_PAGE);
    if (query.syncName !== undefined) return this.syncRuns(query.syncName, query, offset, limit);
    let page: { ids: string[]; total: number };
    if (query.workspace !== undefined) {
      const key =
        query.status !== undefined
          ? this.keys.byStatus(query.workspace, query.status)
          : this.keys.byWorkspace(query.workspace);
      page = await this.pageOf(key, offset, limit);
    } else if (query.status !== undefined) {
      page = await this.mergedStatusPage(query.status, offset, limit);
    } else {
      page = await this.pageOf(this.keys.allRuns(), offset, limit);
    }
    return { runs: await this.records(page.ids, query.workspace), total: page.total };
  }

  /** The records of these runs in order, leaving out any deleted meanwhile; one command each, any slot. */
  async records(ids: string[], workspace?: string): Promise<RunRecord[]> {
    if (ids.length === 0) return [];
    const refs = workspace !== undefined ? ids.map((id) => ({ id, workspace })) : await this.refs.many(ids);
    const hashes = await Promise.all(
      refs.map((ref) => (ref ? this.redis.hgetall(this.keys.run(ref)) : Promise.resolve({}))),
    );
    const runs: RunRecord[] = [];
    for (const fields of hashes) if (Object.keys(fields).length > 0) runs.push(decodeRun(fields).record);
    return runs;
  }

  private async pageOf(key: string, offset: number, limit: number): Promise<{ ids: string[]; total: number }> {
    const [total, ids] = await Promise.all([
      this.redis.zcard(key),
      limit === 0 ? [] : this.redis.zrevrange(key, offset, offset + limit - 1),
    ]);
    return { ids, total };
  }

  /**
   * Runs of one status across every workspace: each workspace's newest `offset + limit`, merged.
   * Workspaces with none of that status are skipped, and when only one has any, its index is
   * paged directly (deep pages stay one range read).
   */
  private async mergedStatusPage(
    status: RunStatus,
    offset: number,
    limit: number,
  ): Promise<{ ids: string[]; total: number }> {
    const workspaces = await this.redis.smembers(this.keys.workspacesWithRuns());
    const keys = workspaces.map((ws) => this.keys.byStatus(ws, status));
    const counts = await Promise.all(keys.map((key) => this.redis.zcard(key)));
    const total = counts.reduce((n, c) => n + c, 0);
    const holding = keys.filter((_, i) => counts[i]! > 0);
    if (holding.length <= 1 || limit === 0) {
      const ids =
        holding.length === 1 && limit > 0 ? await this.redis.zrevrange(holding[0]!, offset, offset + limit - 1) : [];
      return { ids, total };
    }
    const per = await Promise.all(holding.map((key) => this.redis.zrevrange(key, 0, offset + limit - 1, 'WITHSCORES')));
    const entries: Array<[string, number]> = [];
    for (const flat of per) for (let i = 0; i + 1 < flat.length; i += 2) entries.push([flat[i]!, Number(flat[i + 1])]);
    // The same order ZREVRANGE gives one index: score, then id, both descending.
    entries.sort((x, y) => y[1] - x[1] || (y[0] > x[0] ? 1 : y[0] < x[0] ? -1 : 0));
    return { ids: entries.slice(offset, offset + limit).map(([id]) => id), total };
  }

  /** A sync definition's runs (one a tick, so few), filtered on their records. */
  private async syncRuns(
    syncName: string,
    query: ListRunsQuery,
    offset: number,
    limit: number,
  ): Promise<{ runs: RunRecord[]; total: number }> {
    const ids = await this.redis.zrevrange(this.keys.bySync(syncName), 0, -1);
    const matching = (await this.records(ids)).filter(
      (run) =>
        (query.status === undefined || run.status === query.status) &&
        (query.workspace === undefined || run.workspace === query.workspace),
    );
    return { runs: matching.slice(offset, offset + limit), total: matching.length };
  }
}
