import { historyGapsKey, historyLockKey, historyMarksKey } from '../keys/index.js';
import type { RedisClient } from '../redis/index.js';
import type { RunRecord } from '../runs/index.js';

/** What of a run's succeeded results is known to be in the history table. */
export interface RunMark {
  /** Results the writer that stored them wrote (counted after the INSERT). */
  live: number;
  /** The run's succeeded count when a catch-up last wrote every stored result of it. */
  scanned: number;
}

/** Succeeded rows whose changes can no longer reach the table. */
export interface HistoryGap {
  runId: string;
  rows: number;
  reason: string;
  at: string;
}

/**
 * The history's high-water marks in Redis (key-layout.ts, "History"). A run owes history while
 * its succeeded count is above both marks: each stored succeeded result is handed to one
 * writer once, so `live` never counts a result twice, and `scanned` is a count read before a
 * scan that wrote every result then stored. Both only ever say less than is written, never more.
 */
export class HistoryMarks {
  constructor(
    readonly redis: RedisClient,
    readonly prefix: string,
  ) {}

  async addLive(workspace: string, runId: string, n: number): Promise<void> {
    if (n > 0) await this.redis.hincrby(historyMarksKey(this.prefix, workspace), `${runId}:l`, n);
  }

  async setScanned(workspace: string, runId: string, succeeded: number): Promise<void> {
    await this.redis.hset(historyMarksKey(this.prefix, workspace), `${runId}:s`, succeeded);
  }

  async read(workspace: string, runIds: readonly string[]): Promise<RunMark[]> {
    if (runIds.length === 0) return [];
    const values = await this.redis.hmget(
      historyMarksKey(this.prefix, workspace),
      ...runIds.flatMap((id) => [`${id}:l`, `${id}:s`]),
    );
    return runIds.map((_, i) => ({ live: Number(values[2 * i] ?? 0), scanned: Number(values[2 * i + 1] ?? 0) }));
  }

  /** Succeeded results of `run` not known to be in the table (0: none owed). */
  static owed(run: RunRecord, mark: RunMark): number {
    return Math.max(0, run.counts.succeeded - Math.max(mark.live, mark.scanned));
  }

  async addGap(workspace: string, gap: HistoryGap): Promise<void> {
    const { runId, ...rest } = gap;
    await this.redis.hset(historyGapsKey(this.prefix, workspace), runId, JSON.stringify(rest));
  }

  async gaps(workspace: string): Promise<HistoryGap[]> {
    const all = await this.redis.hgetall(historyGapsKey(this.prefix, workspace));
    return Object.entries(all)
      .map(([runId, json]) => ({ runId, ...(JSON.parse(json) as Omit<HistoryGap, 'runId'>) }))
      .sort((a, b) => a.runId.localeCompare(b.runId));
  }

  /** One catch-up of the workspace per period across the fleet: true when this process has it. */
  async takeTurn(workspace: string, token: string, ms: number): Promise<boolean> {
    return (await this.redis.set(historyLockKey(this.prefix, workspace), token, 'PX', ms, 'NX')) === 'OK';
  }
}
