import type { RecordIndex } from '../reconcile/index.js';

/*
 * A whole-list read as DriftCheck keeps it and SharedBeforePasses shares it between the worker
 * processes of a workspace: the shapes and limits both know, here so that SharedBeforePasses
 * need not import drift-check.ts (which owns it: no import cycle).
 */

/**
 * What a read is for, which sets how long it stays fresh (DriftCheck#stale): a drift check must
 * see recent edits; a before-value only names what undo puts back, and is read for every plain row.
 */
export type ReadUse = 'check' | 'before';

/** When a read began and how long it took: what its freshness is judged by (DriftCheck#stale). */
export interface ReadTime {
  startedAt: number;
  durationMs: number;
}

export interface DealKeys {
  byKey: Map<string, Map<string, string[]>>;
  byName: Map<string, string[]>;
}

export interface Snapshot extends ReadTime {
  index: RecordIndex;
  /** Deals only: ids by each match key's normalised value, and by normalised name. */
  deals?: DealKeys;
  /**
   * A pass agreed on the workspace's board: when the board granted it (Redis clock, before its
   * first page). A snapshot another process shared has this process's clock in `startedAt`
   * (the Redis start less SharedBeforePasses' #redisAhead: never younger than it is).
   */
  sharedAt?: number;
}

/**
 * Runs a process remembers, per thing it remembers of them: their first planned-create check
 * (DriftCheck#runStart) and their first before-value ask in the workspace (SharedBeforePasses).
 */
export const RUNS_REMEMBERED = 1000;
