/**
 * Results are split into hashes of this many consecutive rows. Small hashes stay in Redis'
 * compact listpack encoding (default limit 128 entries of up to 64 bytes), which roughly
 * halves the memory of a succeeded row compared with one big hashtable per run.
 */
export const RESULT_BUCKET_ROWS = 100;

/** A run's statuses (the run store's `RunStatus` is this list's type). */
export const RUN_STATUSES = ['running', 'blocked', 'completed', 'failed', 'cancelled'] as const;
type RunStatus = (typeof RUN_STATUSES)[number];

/**
 * The statuses whose indexes every script gets as KEYS[2..5]. The `cancelled` index is derived
 * inside the scripts from the `running` one (PRELUDE in run-scripts.ts), so the KEYS layout the
 * fence scripts share did not have to move when it was added.
 */
const SCRIPT_STATUSES = ['running', 'blocked', 'completed', 'failed'] as const satisfies readonly RunStatus[];

/**
 * Redis key names of the run store and the write fence (the layout: key-layout.ts). Kept in
 * one place so the Lua scripts and the TypeScript side cannot disagree.
 */
export class RunKeys {
  constructor(readonly prefix: string) {}

  run(id: string): string {
    return `${this.prefix}:run:${id}`;
  }

  /** Base of the result bucket keys; the Lua scripts append `:<bucket>` themselves. */
  resultsBase(id: string): string {
    return `${this.prefix}:run:${id}:results`;
  }

  resultBucket(id: string, bucket: number): string {
    return `${this.resultsBase(id)}:${bucket}`;
  }

  bucketOf(row: number): number {
    return Math.floor(row / RESULT_BUCKET_ROWS);
  }

  problems(id: string): string {
    return `${this.prefix}:run:${id}:problems`;
  }

  /** Retry round of each row `runs retry` requeued (rows never retried have none: round 0). */
  rounds(id: string): string {
    return `${this.prefix}:run:${id}:rounds`;
  }

  /** Markers of the run's creates that may have been applied, by row. */
  creating(id: string): string {
    return `${this.prefix}:run:${id}:creating`;
  }

  /** Write order of one CRM record, across the workspace's runs (RowFence). */
  recordOrder(workspace: string, resource: string, recordId: string): string {
    return `${this.prefix}:ws:${workspace}:order:${resource}:${recordId}`;
  }

  /** The one create in flight for a content fingerprint in a workspace. */
  createLock(workspace: string, fingerprint: string): string {
    return `${this.prefix}:ws:${workspace}:create:${fingerprint}`;
  }

  /** The deal an upsert created for a match key (hashed), workspace-wide. */
  upserted(workspace: string, matchHash: string): string {
    return `${this.prefix}:ws:${workspace}:upserted:${matchHash}`;
  }

  /** Why the workspace's queue is held: field `paused` (an operator) and/or `blocked` (a 401). */
  workspaceHolds(workspace: string): string {
    return `${this.prefix}:ws:${workspace}:holds`;
  }

  /** Which run and row recorded a deal, workspace-wide. */
  dealClaim(workspace: string, dealId: string): string {
    return `${this.prefix}:ws:${workspace}:claim:${dealId}`;
  }

  /** Where the workspace's processes agree on deal-list passes (LookupPassBoard). */
  lookupBoard(workspace: string): string {
    return `${this.prefix}:ws:${workspace}:lookup`;
  }

  /** The deals the workspace's last lookup pass saw (gzip'd JSON). */
  lookupSnapshot(workspace: string): string {
    return `${this.prefix}:ws:${workspace}:lookup:snap`;
  }

  allRuns(): string {
    return `${this.prefix}:runs`;
  }

  byStatus(status: RunStatus): string {
    return `${this.prefix}:runs:status:${status}`;
  }

  /** The status indexes scripts get as KEYS[2..5] (see SCRIPT_STATUSES). */
  statusIndexes(): string[] {
    return SCRIPT_STATUSES.map((status) => this.byStatus(status));
  }

  /** Every status index, for removing a run from all of them. */
  allStatusIndexes(): string[] {
    return RUN_STATUSES.map((status) => this.byStatus(status));
  }

  byWorkspace(workspace: string): string {
    return `${this.prefix}:workspace:${workspace}:runs`;
  }

  bySync(syncName: string): string {
    return `${this.prefix}:sync:${syncName}:runs`;
  }

  /** Scratch key for intersecting several list filters; deleted in the same transaction. */
  scratch(token: string): string {
    return `${this.prefix}:tmp:${token}`;
  }
}
