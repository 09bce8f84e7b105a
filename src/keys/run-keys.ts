import { hashTag, workspaceKeyBase } from './key-layout.js';

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
 * A run script's first five KEYS: the run hash and the indexes of the running, blocked,
 * completed and failed runs. The `cancelled` index is derived inside the scripts from the
 * `running` one (src/redis/commands/includes/run-status.lua), so the KEYS layout the fence
 * scripts share did not have to move when it was added.
 */
export interface RunStatusKeys {
  runKey: string;
  runningKey: string;
  blockedKey: string;
  completedKey: string;
  failedKey: string;
}

/** A run and the workspace it belongs to: the workspace is its keys' hash tag. */
export interface RunRef {
  readonly id: string;
  readonly workspace: string;
}

/**
 * Redis key names of the run store and the write fence (the layout: key-layout.ts). Kept in
 * one place so the Lua scripts and the TypeScript side cannot disagree.
 */
export class RunKeys {
  constructor(readonly prefix: string) {}

  run(r: RunRef): string {
    return `${this.prefix}:run:${hashTag(r.workspace)}:${r.id}`;
  }

  /** Base of the result bucket keys; the Lua scripts append `:<bucket>` themselves. */
  resultsBase(r: RunRef): string {
    return `${this.run(r)}:results`;
  }

  resultBucket(r: RunRef, bucket: number): string {
    return `${this.resultsBase(r)}:${bucket}`;
  }

  bucketOf(row: number): number {
    return Math.floor(row / RESULT_BUCKET_ROWS);
  }

  problems(r: RunRef): string {
    return `${this.run(r)}:problems`;
  }

  /** Retry round of each row `runs retry` requeued (rows never retried have none: round 0). */
  rounds(r: RunRef): string {
    return `${this.run(r)}:rounds`;
  }

  /** The names the run's rows gave for the ids they sent (run-names.ts): `<field>\u001f<id>` → name. */
  names(r: RunRef): string {
    return `${this.run(r)}:names`;
  }

  /** Markers of the run's creates that may have been applied, by row. */
  creating(r: RunRef): string {
    return `${this.run(r)}:creating`;
  }

  /**
   * The field of a row's result bucket that keeps the evidence its create was sent (the marker
   * as its send set it; `sent_field` in commands/includes/create-marker.lua): it lives as long as
   * the row's result, whatever becomes of the markers' key and its TTL.
   */
  sentField(row: number): string {
    return `c${row}`;
  }

  /** Where every key of one workspace starts (`<p>:ws:{<w>}`). */
  workspace(workspace: string): string {
    return workspaceKeyBase(this.prefix, workspace);
  }

  /** Write order of one CRM record, across the workspace's runs (RowFence). */
  recordOrder(workspace: string, resource: string, recordId: string): string {
    return `${this.workspace(workspace)}:order:${resource}:${recordId}`;
  }

  /** The one create in flight for a content fingerprint in a workspace. */
  createLock(workspace: string, fingerprint: string): string {
    return `${this.workspace(workspace)}:create:${fingerprint}`;
  }

  /** The deal an upsert created for a match key (hashed), workspace-wide. */
  upserted(workspace: string, matchHash: string): string {
    return `${this.workspace(workspace)}:upserted:${matchHash}`;
  }

  /** Why the workspace's queue is held: field `paused` (an operator) and/or `blocked` (a 401). */
  workspaceHolds(workspace: string): string {
    return `${this.workspace(workspace)}:holds`;
  }

  /**
   * When each kind of hold was last lifted (field = kind, value = epoch ms of the lifting process):
   * a 401 answered later to a request sent before the lift is not a reason to block again.
   */
  workspaceHoldsLifted(workspace: string): string {
    return `${this.workspace(workspace)}:holds:lifted`;
  }

  /** The calibrated clock that stamps the workspace's CRM records (FINISH_CREATE): `lo|hi|atMs|resolutionMs`. */
  recordClock(workspace: string): string {
    return `${this.workspace(workspace)}:record-clock`;
  }

  /** Which run and row recorded a deal, workspace-wide. */
  dealClaim(workspace: string, dealId: string): string {
    return `${this.workspace(workspace)}:claim:${dealId}`;
  }

  /** Where the workspace's processes agree on deal-list passes (LookupPassBoard). */
  lookupBoard(workspace: string): string {
    return `${this.workspace(workspace)}:lookup`;
  }

  /** The deals the workspace's last lookup pass saw (gzip'd JSON). */
  lookupSnapshot(workspace: string): string {
    return `${this.workspace(workspace)}:lookup:snap`;
  }

  /** Where the workspace's processes agree on whole-list passes of `<res>` that serve before-values (LookupPassBoard). */
  beforeBoard(workspace: string, resource: string): string {
    return `${this.workspace(workspace)}:before:${resource}`;
  }

  /** The records the workspace's last before-value pass over `<res>` saw (gzip'd JSON, packed records). */
  beforeSnapshot(workspace: string, resource: string): string {
    return `${this.workspace(workspace)}:before:${resource}:snap`;
  }

  /** When a worker process of the workspace first asked for before-values of a run (Redis clock). */
  beforeRunStart(workspace: string, runId: string): string {
    return `${this.workspace(workspace)}:before-run:${runId}`;
  }

  /** Every run id, fleet-wide (outside any script: written before the run's record exists). */
  allRuns(): string {
    return `${this.prefix}:runs`;
  }

  /** Run id → workspace: how a run id finds its keys. */
  runWorkspaces(): string {
    return `${this.prefix}:runs:workspace`;
  }

  /** The workspaces that have (or had) runs: what a fleet-wide listing by status merges. */
  workspacesWithRuns(): string {
    return `${this.prefix}:runs:workspaces`;
  }

  byStatus(workspace: string, status: RunStatus): string {
    return `${this.workspace(workspace)}:runs:status:${status}`;
  }

  /** The five KEYS every run script starts with, by the names its header gives them (includes/run-status.lua). */
  runStatusKeys(ref: RunRef): RunStatusKeys {
    return {
      runKey: this.run(ref),
      runningKey: this.byStatus(ref.workspace, 'running'),
      blockedKey: this.byStatus(ref.workspace, 'blocked'),
      completedKey: this.byStatus(ref.workspace, 'completed'),
      failedKey: this.byStatus(ref.workspace, 'failed'),
    };
  }

  /** Every status index of the workspace, for removing a run from all of them. */
  allStatusIndexes(workspace: string): string[] {
    return RUN_STATUSES.map((status) => this.byStatus(workspace, status));
  }

  byWorkspace(workspace: string): string {
    return `${this.workspace(workspace)}:runs`;
  }

  /** Run ids of a sync definition (fleet-wide, small: one run a schedule tick). */
  bySync(syncName: string): string {
    return `${this.prefix}:sync:${syncName}:runs`;
  }
}
